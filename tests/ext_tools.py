"""Extension tools the core tests drive: they record when they run, fail on demand, and print
as much as asked. Loaded through the real `extensions` config (module name `ext_tools`)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import zuno

LOG: list[tuple[str, str, float]] = []  # (tag, "start"|"end", time)
ACTIVE = {"now": 0, "max": 0}
FLAKY: dict[str, int] = {}


def reset() -> None:
    LOG.clear()
    ACTIVE.update(now=0, max=0)
    FLAKY.clear()


async def _span(tag: str, ms: int) -> str:
    ACTIVE["now"] += 1
    ACTIVE["max"] = max(ACTIVE["max"], ACTIVE["now"])
    LOG.append((tag, "start", time.monotonic()))
    try:
        await asyncio.sleep(ms / 1000)
    finally:
        LOG.append((tag, "end", time.monotonic()))
        ACTIVE["now"] -= 1
    return f"{tag} done"


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def par_sleep(tag: str, ms: int = 50) -> str:
    """Sleep ms milliseconds; may overlap with other non-exclusive calls."""
    return await _span(tag, ms)


@zuno.tool
async def excl_sleep(tag: str, ms: int = 50) -> str:
    """Sleep ms milliseconds; undeclared, so SideEffecting / Never / Exclusive."""
    return await _span(tag, ms)


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def boom(message: str = "kaput") -> str:
    """Raise an exception inside the tool."""
    raise RuntimeError(message)


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def flaky_safe(key: str, failures: int = 1) -> str:
    """Fail transiently `failures` times, then succeed (replay Safe)."""
    FLAKY[key] = FLAKY.get(key, 0) + 1
    if FLAKY[key] <= failures:
        raise zuno.TransientError(f"transient failure {FLAKY[key]}")
    return f"ok after {FLAKY[key]} attempts"


@zuno.tool
async def flaky_never(key: str) -> str:
    """Fail transiently once (replay Never: must not be retried)."""
    FLAKY[key] = FLAKY.get(key, 0) + 1
    raise zuno.TransientError(f"transient failure {FLAKY[key]}")


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
def emit(size: int, line: str = "x") -> zuno.ToolOutput:
    """Return exactly `size` bytes of output made of repeated lines (UTF-8 of `line`)."""
    unit = ((line + "\n") if line else "\n").encode()
    raw = (unit * (size // len(unit) + 1))[:size]
    return zuno.ToolOutput(text=raw.decode("utf-8", "replace"), raw=raw)


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
def emit_bytes(data_hex: str) -> zuno.ToolOutput:
    """Return exact bytes (hex-encoded in the argument) as the output body."""
    raw = bytes.fromhex(data_hex)
    return zuno.ToolOutput(text=raw.decode("utf-8", "replace"), raw=raw)


@zuno.tool
async def touch_and_hang(path: str, seconds: float = 60.0) -> str:
    """Create a marker file (counting runs), then hang: used to kill the process mid-call."""
    with open(path, "a") as f:
        f.write(f"run {os.getpid()}\n")
    await asyncio.sleep(seconds)
    return "finished"


@zuno.tool(effect="UserMediated")
async def ask_user(question: str) -> str:
    """A user-mediated tool (not an approval surface)."""
    return f"asked: {question}"


@zuno.tool(effect="Delegating")
async def delegate_work(objective: str) -> str:
    """A delegating tool: its children are evaluated on their own."""
    return f"delegated: {objective}"


def _unused(*_: Any) -> None:  # keeps the module importable without side effects
    return None

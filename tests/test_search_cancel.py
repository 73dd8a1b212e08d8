"""Cancellation kills rg; both tools are ReadOnly / Safe / ParallelSafe and overlap in a step."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import zuno
from zuno.tools.search.rg_discovery import RgLocator

from conftest import RunZuno


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return True if f.read().split(") ")[1][0] not in "ZX" else "zombie"  # type: ignore[return-value]
    except FileNotFoundError:
        return False


async def _wait_running(s: zuno.Session, n: int, within: float = 30) -> set[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        loc = s.services.peek(RgLocator)
        if loc is not None and len(loc.running) >= n:
            return set(loc.running)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{n} rg processes never ran together")


async def test_cancel_kills_and_reaps_rg(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)  # rg blocks opening it until a writer comes: a search that never ends by itself
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        step = asyncio.create_task(s.step([{"name": "grep", "arguments": {"pattern": "x", "path": "pipe"}}]))
        pids = await _wait_running(s, 1)
        s.cancel()
        res = await asyncio.wait_for(step, 30)
        rec = res.results[0]
        assert rec.cancelled is True and rec.outcome == "error"
        for pid in pids:
            assert _alive(pid) is False, f"rg {pid} survived its cancelled call"
        assert s.services.peek(RgLocator).running == set()  # type: ignore[union-attr]


def test_declarations_on_both_profiles(workspace: Path, run_zuno: RunZuno) -> None:
    for profile in ("zuno", "chord"):
        proc = run_zuno("tools", "--json", "--profile", profile)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        tools = {t["name"]: t for t in (data["tools"] if isinstance(data, dict) else data)}
        for name in ("glob", "grep"):
            assert tools[name]["declarations"] == {
                "effect": "ReadOnly",
                "replay": "Safe",
                "concurrency": "ParallelSafe",
            }, (profile, tools[name])


async def test_searches_in_one_step_overlap(workspace: Path) -> None:
    a, b = workspace / "a.fifo", workspace / "b.fifo"
    os.mkfifo(a)
    os.mkfifo(b)
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        step = asyncio.create_task(
            s.step(
                [
                    {"name": "grep", "arguments": {"pattern": "needle", "path": "a.fifo"}},
                    {"name": "grep", "arguments": {"pattern": "needle", "path": "b.fifo"}},
                ]
            )
        )
        # Both rg processes are blocked on their pipes at the same time: only overlap gets here.
        await _wait_running(s, 2)

        def feed(p: Path, text: str) -> None:
            with open(p, "w") as f:
                f.write(text)

        threads = [threading.Thread(target=feed, args=(p, f"needle {p.name}\n")) for p in (a, b)]
        for t in threads:
            t.start()
        res = await asyncio.wait_for(step, 30)
        for t in threads:
            t.join(10)
        assert [r.text for r in res.results] == ["a.fifo:1:needle a.fifo", "b.fifo:1:needle b.fifo"]

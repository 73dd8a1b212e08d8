"""Requests in flight together keep the dispatcher's rules across steps: ParallelSafe calls
overlap, an Exclusive call is a two-sided barrier, admission follows arrival order. Measured by
the records' own timestamps (structuredContent.started_at / ended_at)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_peers import MODES, zuno_client

SLOW = '''
import asyncio
import zuno

@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def slow_look(ms: int) -> str:
    """Look at something slowly."""
    await asyncio.sleep(ms / 1000)
    return "looked"

@zuno.tool()
async def slow_change(ms: int) -> str:
    """Change something slowly (SideEffecting, Exclusive)."""
    await asyncio.sleep(ms / 1000)
    return "changed"
'''


def _span(result) -> tuple[float, float]:
    f = result.structured_content
    assert f["outcome"] == "ok", result.content[0].text
    return f["started_at"], f["ended_at"]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("mode", MODES)
async def test_two_writes_serialise_and_two_parallel_reads_overlap(workspace: Path, mode: str) -> None:
    (workspace / "slow.py").write_text(SLOW)
    big = "x" * (4 << 20)
    async with zuno_client(workspace, mode, config={"extensions": ["slow.py"]}) as c:
        w1, w2 = await asyncio.gather(
            c.call_tool("write", {"path": "one.txt", "content": big}),
            c.call_tool("write", {"path": "two.txt", "content": big}),
        )
        r1, r2 = await asyncio.gather(c.call_tool("slow_look", {"ms": 400}), c.call_tool("slow_look", {"ms": 400}))
        plain = await asyncio.gather(*(c.call_tool("read", {"path": p}) for p in ("one.txt", "two.txt")))
    assert not _overlap(_span(w1), _span(w2))
    assert _overlap(_span(r1), _span(r2))
    assert all(not p.is_error for p in plain)


@pytest.mark.parametrize("mode", MODES)
async def test_an_exclusive_request_is_a_two_sided_barrier_in_arrival_order(workspace: Path, mode: str) -> None:
    (workspace / "slow.py").write_text(SLOW)
    async with zuno_client(workspace, mode, config={"extensions": ["slow.py"]}) as c:

        async def later(delay: float, name: str, ms: int):
            await asyncio.sleep(delay)
            return await c.call_tool(name, {"ms": ms})

        a, b, x, d = await asyncio.gather(
            later(0.0, "slow_look", 500),
            later(0.05, "slow_look", 500),
            later(0.15, "slow_change", 300),
            later(0.25, "slow_look", 100),
        )
    a_, b_, x_, d_ = (_span(r) for r in (a, b, x, d))
    assert _overlap(a_, b_)
    assert x_[0] >= max(a_[1], b_[1])  # earlier calls settle first
    assert d_[0] >= x_[1]  # no later call starts until it settles

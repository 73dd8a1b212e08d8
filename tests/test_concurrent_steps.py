"""Several steps of one session in flight at once (an MCP client's concurrent requests): each
keeps its own state, cancelling one settles only its calls, a notice is delivered once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import zuno

import ext_tools


async def test_cancelling_one_step_settles_only_its_calls(workspace: Path) -> None:
    ext_tools.reset()
    async with zuno.Runtime(root=workspace, config_overrides={"extensions": ["ext_tools"]}) as rt:
        async with rt.session() as s:
            a = asyncio.create_task(s.step([{"name": "par_sleep", "arguments": {"tag": "a", "ms": 3000}}]))
            b = asyncio.create_task(s.step([{"name": "par_sleep", "arguments": {"tag": "b", "ms": 300}}]))
            await asyncio.sleep(0.1)
            a.cancel()
            done = await b
            try:
                await a
            except asyncio.CancelledError:
                pass
            calls = {r.name + ":" + str(r.arguments["tag"]): r for r in rt.store.calls(s.id)}
    assert done.results[0].outcome is zuno.Outcome.ok and not done.results[0].cancelled
    cancelled = calls["par_sleep:a"]
    assert cancelled.state == "settled" and cancelled.cancelled and cancelled.outcome == "error"
    assert calls["par_sleep:b"].outcome == "ok"


async def test_a_notice_goes_to_one_of_two_overlapping_steps_only(workspace: Path) -> None:
    ext_tools.reset()
    async with zuno.Runtime(root=workspace, config_overrides={"extensions": ["ext_tools"]}) as rt:
        async with rt.session() as s:
            rt.store.add_notice(s.id, "test", "once")
            first = asyncio.create_task(s.step([{"name": "par_sleep", "arguments": {"tag": "x", "ms": 300}}]))
            await asyncio.sleep(0.05)
            second = await s.step([{"name": "par_sleep", "arguments": {"tag": "y", "ms": 10}}])
            got_first = await first
            third = await s.step([])
    texts = [n["text"] for r in (got_first, second, third) for n in r.notices]
    assert texts == ["once"]
    assert [n["text"] for n in got_first.notices] == ["once"]

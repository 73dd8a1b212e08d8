"""The dispatcher: admission order, blocked kinds, overlap, barriers, the bound, call order,
errors as values, retries and cancellation — through the real Python API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import zuno

import ext_tools


@pytest.fixture(autouse=True)
def _reset() -> None:
    ext_tools.reset()


def runtime(root: Path, **overrides: Any) -> zuno.Runtime:
    cfg = {"extensions": ["ext_tools"], **overrides}
    return zuno.Runtime(root=root, config_overrides=cfg)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def test_each_block_kind_commits_its_event_before_its_result(workspace: Path) -> None:
    rules = [{"tool": "write", "action": "deny"}]
    async with runtime(workspace, permission={"rules": rules}) as rt, rt.session() as s:
        res = await s.step(
            [
                call("no_such_tool"),
                call("read", pth="x"),
                call("write", path="a.txt", content="x"),
                {"name": "read", "arguments": "{not json"},
            ]
        )
        kinds = [(r.outcome, r.block_kind) for r in res.results]
        assert kinds == [
            ("blocked", "unavailable"),
            ("blocked", "invalid_arguments"),
            ("blocked", "denied"),
            ("blocked", "invalid_arguments"),
        ]
        assert "'path' is required" in res.results[1].text and "'pth' is not an argument" in res.results[1].text
        assert not (workspace / "a.txt").exists()
        events = rt.store.events(s.id)
        blocked_events = [e for e in events if e["kind"] == "dispatch-blocked"]
        assert [e["data"]["block_kind"] for e in blocked_events] == [
            "unavailable",
            "invalid_arguments",
            "denied",
            "invalid_arguments",
        ]
        # Each event is committed before the result row of its call was appended.
        rows = rt.store.query("SELECT call_id, recorded_at FROM calls WHERE session_id = ? ORDER BY idx", (s.id,))
        for e, row in zip(blocked_events, rows, strict=True):
            assert e["call_id"] == row["call_id"]
            assert e["at"] <= row["recorded_at"]
        # And before any call-level settle: the event sequence numbers come first.
        seqs = {e["kind"]: e["seq"] for e in events}
        assert max(e["seq"] for e in blocked_events) < seqs["step-ended"]
        stored = rt.store.calls(s.id)
        assert [(c.outcome, c.block_kind) for c in stored] == [(str(a), str(b)) for a, b in kinds]


async def test_results_come_back_in_call_order_whatever_the_completion_order(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        res = await s.step([call("par_sleep", tag="slow", ms=300), call("par_sleep", tag="fast", ms=10)])
        assert [r.text for r in res.results] == ["slow done", "fast done"]
        ends = {tag: t for tag, what, t in ext_tools.LOG if what == "end"}
        assert ends["fast"] < ends["slow"]  # they really completed the other way round
        settles = [e for e in rt.store.events(s.id) if e["kind"] == "call-settled"]
        assert [e["call_id"] for e in settles] == [r.call_id for r in res.results]


async def test_exclusive_call_is_a_two_sided_barrier(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        res = await s.step(
            [
                call("par_sleep", tag="a", ms=120),
                call("par_sleep", tag="b", ms=120),
                call("excl_sleep", tag="x", ms=60),
                call("par_sleep", tag="c", ms=120),
                call("par_sleep", tag="d", ms=120),
            ]
        )
        assert all(r.outcome == "ok" for r in res.results)
        by = {r.name + ":" + r.text.split()[0]: r for r in res.results}
        a, b, x, c, d = (by[k] for k in ("par_sleep:a", "par_sleep:b", "excl_sleep:x", "par_sleep:c", "par_sleep:d"))
        assert x.started_at is not None and x.ended_at is not None
        # Earlier overlapping calls settle first; no later call starts until it settles.
        assert max(a.ended_at, b.ended_at) <= x.started_at  # type: ignore[type-var]
        assert x.ended_at <= min(c.started_at, d.started_at)  # type: ignore[type-var]
        # Calls on the same side of the barrier did overlap.
        assert a.started_at < b.ended_at and b.started_at < a.ended_at  # type: ignore[operator]
        assert x.declarations.concurrency == "Exclusive"


@pytest.mark.parametrize("bound", [1, 3])
async def test_never_more_than_the_bound_at_once(workspace: Path, bound: int) -> None:
    async with runtime(workspace, concurrency={"tool_calls": bound}) as rt, rt.session() as s:
        res = await s.step([call("par_sleep", tag=f"t{i}", ms=40) for i in range(8)])
        assert all(r.outcome == "ok" for r in res.results)
        assert ext_tools.ACTIVE["max"] == bound


async def test_an_exception_inside_a_tool_is_an_error_value(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        res = await s.step([call("boom", message="disk on fire"), call("par_sleep", tag="ok", ms=1)])
        assert res.results[0].outcome == "error"
        assert "RuntimeError: disk on fire" in res.results[0].text
        assert res.results[1].outcome == "ok"


async def test_safe_calls_retry_transient_failures_a_bounded_number_of_times(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        res = await s.step([call("flaky_safe", key="a", failures=2), call("flaky_safe", key="b", failures=5)])
        assert res.results[0].outcome == "ok" and "after 3 attempts" in res.results[0].text
        assert res.results[1].outcome == "error"
        assert ext_tools.FLAKY["b"] == zuno.limits.SAFE_RETRY_ATTEMPTS  # bounded: never more
        retries = [e for e in rt.store.events(s.id) if e["kind"] == "call-retry"]
        assert len(retries) == 2 + (zuno.limits.SAFE_RETRY_ATTEMPTS - 1)


async def test_never_calls_are_never_retried(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        res = await s.step([call("flaky_never", key="n")])
        assert res.results[0].outcome == "error"
        assert "replay policy is Never" in res.results[0].text
        assert ext_tools.FLAKY["n"] == 1


async def test_cancel_settles_running_calls_and_skips_the_rest(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        task = asyncio.create_task(
            s.step([call("par_sleep", tag="r", ms=5000), call("excl_sleep", tag="later", ms=10)])
        )
        await asyncio.sleep(0.2)
        s.cancel()
        res = await asyncio.wait_for(task, 10)
        first, second = res.results
        assert first.cancelled and first.outcome == "error" and "changed nothing" in first.text
        assert second.cancelled and second.metadata.get("notStarted") and second.started_at is None
        assert not any(tag == "later" for tag, _, _ in ext_tools.LOG)
        assert all(c.state == "settled" for c in rt.store.calls(s.id))


async def test_cancelling_the_step_task_records_everything_then_raises(workspace: Path) -> None:
    async with runtime(workspace) as rt, rt.session() as s:
        task = asyncio.create_task(s.step([call("excl_sleep", tag="side", ms=5000)]))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (row,) = rt.store.calls(s.id)
        assert row.state == "settled" and row.outcome == "uncertain" and row.cancelled


async def test_mixed_tool_classifies_from_validated_action(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        bg = rt.surface.tools["bg"]
        args = bg.Args.model_validate({"action": "artifact", "outputPath": "x"})
        assert bg.classify(args).effect == "ReadOnly"

        class NoAction:
            action = None

        class Unknown:
            action = "explode"

        assert bg.classify(NoAction()).effect == "SideEffecting"  # type: ignore[arg-type]
        assert bg.classify(Unknown()).effect == "SideEffecting"  # type: ignore[arg-type]


async def test_cross_cutting_arguments_are_accepted_by_every_tool(workspace: Path) -> None:
    (workspace / "f.txt").write_text("hi\n")
    async with runtime(workspace) as rt, rt.session() as s:
        res = await s.step(
            [
                call("read", path="f.txt", intent="look at f"),
                call("par_sleep", tag="t", ms=1, intent="wait", accept_large_output=False),
                call("read", path="f.txt", intent=3),
            ]
        )
        assert [r.outcome for r in res.results] == ["ok", "ok", "blocked"]
        assert "'intent' must be a string" in res.results[2].text
        for name in rt.surface.tools:
            props = rt.surface.tools[name].input_schema()["properties"]
            assert "intent" in props and "accept_large_output" in props


async def test_a_one_call_small_read_starts_no_task_and_a_waiting_tool_gets_one(workspace: Path) -> None:
    # The price of a one-call step is one commit, not a task: on 3.11 (no eager tasks) a tool that
    # enters nothing before its first wait (read, write) starts in the step's task. A tool that
    # may enter a deadline first (an extension, webfetch) runs in its own task from its first line.
    (workspace / "a.txt").write_text("a\n")
    made: list[object] = []
    loop = asyncio.get_running_loop()

    def factory(lp: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=lp, **kw)

    @zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
    async def waits() -> str:
        """Wait a turn of the loop."""
        async with asyncio.timeout(5):  # a deadline entered before the first wait
            await asyncio.sleep(0)
        return "waited"

    async with zuno.Runtime(root=workspace, tools=[waits]) as rt, rt.session() as s:
        await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])  # the session's first step
        loop.set_task_factory(factory)
        try:
            (r,) = (await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])).results
            assert r.outcome == "ok" and made == []
            (w,) = (await s.step([{"name": "waits", "arguments": {}}])).results
            assert w.outcome == "ok" and w.text == "waited"
        finally:
            loop.set_task_factory(None)

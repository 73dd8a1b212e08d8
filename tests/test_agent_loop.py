"""The agent loop with an in-process Provider of Zuno's own protocol: steps, barriers, malformed
calls, limits, the surface, modes and reconciliation, stagnant reads, refresh failures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import zuno
from agent_double import Reply, ScriptedProvider, call, calls, say
from zuno.agent.types import ModelRequest, ToolResultMessage, Usage
from zuno.declarations import READ_ONLY_PARALLEL
from zuno.projection import ContextSection
from zuno.surface import Registry, default_registry
from zuno.tool import Tool, ToolArgs, ToolContext, ToolOutput


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def drive(root: Path, provider: ScriptedProvider, prompt: str, **kw: Any) -> Any:
    rt_kw = {k: kw.pop(k) for k in ("registry", "config_overrides", "tools") if k in kw}
    async with zuno.Runtime(root=root, **rt_kw) as rt:
        async with rt.agent(provider=provider, **kw) as agent:
            events: list[Any] = []
            result = await agent.run(prompt, on_event=events.append)
            return result, events, agent.transcript.items(), agent.transcript.requests(), rt.store.calls(result.session)


def test_parallel_reads_and_a_barrier_in_one_step(workspace: Path) -> None:
    for n in "abc":
        (workspace / f"{n}.txt").write_text(f"file {n}\n")
    step1 = calls(
        call("read", {"path": "a.txt"}),
        call("read", {"path": "b.txt"}),
        call("write", {"path": "new.txt", "content": "made\n"}),
        call("read", {"path": "new.txt"}),
        call("grep", {"pattern": "file"}),
    )
    p = ScriptedProvider([step1, calls(call("glob", {"pattern": "*.txt"})), say("all done")])
    result, events, items, requests, rows = run(drive(workspace, p, "look around"))
    assert result.stop_reason == "final" and result.final_text == "all done" and result.steps == 2
    # The results come back in call order, each linked to the dispatcher's row.
    second = p.requests[1].messages
    results = [m for m in second if isinstance(m, ToolResultMessage)]
    assert [r.call_id for r in results] == [c.id for c in step1.calls]
    assert "file a" in results[0].text and "file b" in results[1].text and "made" in results[3].text
    by_id = {r.call_id: r for r in rows}
    tr = [i for i in items if i.kind == "tool_result"]
    assert all(i.call_seq == by_id[i.call_id].seq and i.step == by_id[i.call_id].step for i in tr)
    # The write is a barrier: both reads before it ended before it started; the read after it
    # started after it ended.
    a, b, w, after = (by_id[c.id] for c in step1.calls[:4])
    assert a.ended_at <= w.started_at and b.ended_at <= w.started_at and w.ended_at <= after.started_at
    assert len({by_id[c.id].step for c in step1.calls}) == 1  # one step
    # Requests are recorded with digests and counts, and every response before the next request.
    assert [r.status for r in requests] == ["finished"] * 3
    assert [i.kind for i in items][:2] == ["user", "assistant"]
    kinds = [e.kind for e in events]
    assert kinds.count("tool_call") == 6 and kinds.count("tool_result") == 6 and kinds[-1] == "stop"


def test_malformed_calls_become_blocked_results_the_model_corrects(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")

    def script(req: ModelRequest, i: int) -> Reply:
        if i == 0:
            return calls(call("read", '{"path": "a.txt"'), call("no_such_tool", {"x": 1}), call("read", {"pth": "a"}))
        if i == 1:
            results = [m for m in req.messages if isinstance(m, ToolResultMessage)]
            assert all(r.is_error for r in results)
            assert "not valid JSON" in results[0].text
            assert "no_such_tool" in results[1].text and "not available" in results[1].text
            assert "pth" in results[2].text
            return calls(call("read", {"path": "a.txt"}))
        assert "alpha" in req.messages[-1].text  # type: ignore[union-attr]
        return say("corrected")

    p = ScriptedProvider(script)
    result, _, items, _, rows = run(drive(workspace, p, "read a"))
    assert result.stop_reason == "final" and result.final_text == "corrected"
    assert [r.outcome for r in rows[:3]] == ["blocked"] * 3
    assert [i.data["outcome"] for i in items if i.kind == "tool_result"][:3] == ["blocked"] * 3


def test_step_and_token_limits_have_typed_stop_reasons(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    forever = ScriptedProvider(lambda req, i: calls(call("read", {"path": "a.txt"})))
    result, _, items, requests, _ = run(
        drive(workspace, forever, "loop", config_overrides={"agent": {"limits": {"steps_per_turn": 3}}})
    )
    assert result.stop_reason == "step_limit" and result.steps == 3 and "steps_per_turn" in result.detail
    assert len(requests) == 3  # no request whose calls could not run
    tool_calls = [c for i in items if i.kind == "assistant" for c in i.data["tool_calls"]]
    assert len([i for i in items if i.kind == "tool_result"]) == len(tool_calls)

    forever2 = ScriptedProvider(lambda req, i: calls(call("read", {"path": "a.txt"})))
    result, _, _, requests, _ = run(
        drive(workspace, forever2, "loop", config_overrides={"agent": {"limits": {"tokens_per_turn": 250}}})
    )
    assert result.stop_reason == "token_limit" and len(requests) == 3  # 120 tokens a request


def test_time_limit_cuts_a_slow_stream(workspace: Path) -> None:
    slow = ScriptedProvider([say("x" * 50, chunks=50, chunk_delay=0.1)])
    result, _, items, requests, _ = run(
        drive(workspace, slow, "hi", config_overrides={"agent": {"limits": {"seconds_per_turn": 1}}})
    )
    assert result.stop_reason == "time_limit"
    assert requests[0].status == "interrupted"
    partial = next(i for i in items if i.kind == "assistant")
    assert partial.data["interrupted"] and 0 < len(partial.data["text"]) < 50


def test_view_image_and_hosted_web_search_follow_the_model(workspace: Path) -> None:
    def names(p: ScriptedProvider) -> list[str]:
        return [t.name for t in p.requests[0].tools]

    chord = {"profile": "chord"}
    blind = ScriptedProvider([say("ok")])
    run(drive(workspace, blind, "hi", config_overrides=chord))
    assert "view_image" not in names(blind) and "read" in names(blind)
    seeing = ScriptedProvider([say("ok")], accepts_images=True)
    run(drive(workspace, seeing, "hi", config_overrides=chord))
    assert "view_image" in names(seeing)
    assert seeing.requests[0].hosted_tools == ()
    hosted_cfg = {
        "profile": "chord",
        "compat": {"hosted_tools": ["web_search"], "web_search": {"allowed_domains": ["docs.python.org"]}},
    }
    unsupported = ScriptedProvider([say("ok")])
    run(drive(workspace, unsupported, "hi", config_overrides=hosted_cfg))
    assert unsupported.requests[0].hosted_tools == ()
    supported = ScriptedProvider([say("ok")], hosted=frozenset({"web_search"}))
    run(drive(workspace, supported, "hi", config_overrides=hosted_cfg))
    (h,) = supported.requests[0].hosted_tools
    assert h.kind == "web_search" and h.allowed_domains == ("docs.python.org",)
    assert "web_search" not in names(supported)


# -- modes and reconciliation -------------------------------------------------------------------


class _State:
    """What a fake Goal/Plan refresher reports, changed by the test between requests."""

    def __init__(self) -> None:
        self.runnable = True
        self.goal_active = True
        self.fingerprint = "same"
        self.fail = False

    def refresher(self, store: Any, session_id: str) -> ContextSection | None:
        if self.fail:
            raise RuntimeError("the plan table is locked")
        return ContextSection(
            "goal",
            f"Goal: ship it (fingerprint {self.fingerprint})",
            runnable=self.runnable,
            fingerprint=self.fingerprint,
            goal_active=self.goal_active,
        )


def _registry_with(*refreshers: Any, tools: tuple[type[Tool], ...] = ()) -> Registry:
    base = default_registry()
    reg = Registry(dict(base.factories), list(base.migrations), list(base.refreshers))
    for r in refreshers:
        reg.refreshers.append(("goal", r))
    for t in tools:
        reg.factories[("zuno", t.name)] = t
    return reg


def test_work_mode_final_ends_the_cycle_even_with_runnable_work(workspace: Path) -> None:
    state = _State()
    p = ScriptedProvider([say("stopping here")])
    result, *_ = run(drive(workspace, p, "go", mode="work", registry=_registry_with(state.refresher)))
    assert result.stop_reason == "final" and len(p.requests) == 1
    assert "fingerprint same" in p.requests[0].system  # the dynamic context reached the request


def test_plan_mode_shows_read_only_tools_and_never_continues(workspace: Path) -> None:
    state = _State()
    p = ScriptedProvider([say("here is the plan")])
    result, *_ = run(drive(workspace, p, "plan it", mode="plan", registry=_registry_with(state.refresher)))
    names = {t.name for t in p.requests[0].tools}
    assert result.stop_reason == "final" and len(p.requests) == 1
    assert {"read", "grep", "glob"} <= names and not names & {"write", "apply_patch", "shell"}
    assert "Mode: Plan" in p.requests[0].system


def test_goal_mode_continues_with_progress_and_pauses_on_no_progress(workspace: Path) -> None:
    # One rule (the state family's persisted observer): each final of a Goal cycle is one
    # observation; progress (here a recorded write) resets the count; the third identical
    # consecutive observation pauses the Goal with no_progress and stops the turn.
    goal = {"action": "create", "objective": "ship", "criteria": [{"text": "tests pass"}]}
    p = ScriptedProvider(
        [
            calls(call("goal_update", goal)),
            say("one"),  # observation 1
            calls(call("write", {"path": "made.txt", "content": "made\n"})),
            say("two"),  # changed by the write: 1 again
            say("three"),  # 2
            say("four"),  # 3: no_progress
            say("never asked"),
        ]
    )
    result, _, items, _, _ = run(drive(workspace, p, "reach the goal", mode="goal"))
    assert result.stop_reason == "no_progress" and len(p.requests) == 6
    assert result.detail.startswith("3 consecutive identical observations of the active Goal; it is paused")
    assert sum(1 for i in items if i.kind == "notice" and i.data["source"] == "continuation") == 3

    async def stored() -> Any:
        from zuno.tools.state import read_goal

        async with zuno.Runtime(root=workspace) as rt:
            return read_goal(rt.store, result.session), rt.store.query(
                "SELECT kind, data FROM events WHERE session_id = ? AND kind = 'goal-paused'", (result.session,)
            )

    goal_now, paused = run(stored())
    assert goal_now["goal"]["status"] == "paused" and goal_now["goal"]["pause_reason"]["kind"] == "no_progress"
    assert [json.loads(r["data"]) for r in paused] == [{"reason": "no_progress", "observations": 3}]


def test_a_failed_goal_observer_pauses_the_turn(workspace: Path) -> None:
    def broken(store: Any, session_id: str, observation_id: str) -> Any:
        raise RuntimeError("the progress table is locked")

    state = _State()
    reg = _registry_with(state.refresher)
    reg.goal_observers.append(broken)
    p = ScriptedProvider([say("answer"), say("never asked")])
    result, *_ = run(drive(workspace, p, "go", mode="goal", registry=reg))
    assert result.stop_reason == "context_refresh_failed" and len(p.requests) == 1
    assert "the progress table is locked" in result.detail


def test_goal_mode_stops_without_runnable_work_and_at_the_continuation_limit(workspace: Path) -> None:
    state = _State()
    state.runnable = False
    p = ScriptedProvider([say("nothing to run")])
    result, *_ = run(drive(workspace, p, "go", mode="goal", registry=_registry_with(state.refresher)))
    assert result.stop_reason == "final" and len(p.requests) == 1

    state2 = _State()
    counter = iter(range(100))

    def script(req: ModelRequest, i: int) -> Reply:
        state2.fingerprint = f"f{next(counter)}"
        return say("more")

    p2 = ScriptedProvider(script)
    result, *_ = run(
        drive(
            workspace,
            p2,
            "go",
            mode="goal",
            registry=_registry_with(state2.refresher),
            config_overrides={"agent": {"limits": {"continuations": 2}}},
        )
    )
    assert result.stop_reason == "continuation_limit" and len(p2.requests) == 3


def test_mode_is_durable_and_switches_mid_session(workspace: Path) -> None:
    async def go() -> tuple[str, str, str]:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent(provider=ScriptedProvider([say("a")]), mode="plan") as agent:
                await agent.run("first")
                sid = agent.id
            async with rt.agent(provider=ScriptedProvider([say("b")]), session_id=sid) as agent:
                kept = agent.transcript.state().mode
                agent.set_mode("goal")
                p = ScriptedProvider([say("c")])
                agent.loop.provider = p  # type: ignore[union-attr]
                await agent.run("second")
                return kept, agent.transcript.state().mode, p.requests[0].system

    kept, now, system = run(go())
    assert kept == "plan" and now == "goal" and "Mode: Goal" in system


def test_a_failed_refresher_pauses_the_turn(workspace: Path) -> None:
    state = _State()
    state.fail = True
    p = ScriptedProvider([say("never")])
    result, *_ = run(drive(workspace, p, "go", registry=_registry_with(state.refresher)))
    assert result.stop_reason == "context_refresh_failed" and "plan table is locked" in result.detail
    assert p.requests == []  # no stale snapshot was sent


class _PlanGet(Tool):
    name = "plan_get"
    description = "Read the plan."
    Args = ToolArgs
    declarations = READ_ONLY_PARALLEL
    fingerprint = "p1"

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        return ToolOutput(text="plan: step 1", metadata={"progressFingerprint": _PlanGet.fingerprint})


def test_three_unchanged_single_reads_stop_with_stagnant_tool_loop(workspace: Path) -> None:
    reg = _registry_with(tools=(_PlanGet,))
    p = ScriptedProvider(lambda req, i: calls(call("plan_get", {"intent": f"look {i}"})))
    result, *_ = run(drive(workspace, p, "go", registry=reg, config_overrides={"tools": {}}))
    assert result.stop_reason == "stagnant_tool_loop" and result.steps == 3 and len(p.requests) == 3

    # A changed fingerprint (a mutation) resets the count.
    def script(req: ModelRequest, i: int) -> Reply:
        _PlanGet.fingerprint = "p1" if i < 2 else "p2"
        return calls(call("plan_get", {}))

    p2 = ScriptedProvider(script)
    result, *_ = run(drive(workspace, p2, "go", registry=reg))
    assert result.stop_reason == "stagnant_tool_loop" and result.steps == 5


def test_the_jobs_section_is_rebuilt_from_the_jobs_table(workspace: Path) -> None:
    rows: list[Any] = []

    def script(req: ModelRequest, i: int) -> Reply:
        if i == 0:
            return calls(call("shell", {"command": "sleep 5", "run_in_background": True}))
        rows.append(req.system)
        return say("started it")

    p = ScriptedProvider(script)

    async def go() -> Any:
        async with zuno.Runtime(
            root=workspace, config_overrides={"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
        ) as rt:
            async with rt.agent(provider=p, wait_background=False) as agent:
                return await agent.run("start a job")

    result = run(go())
    assert result.stop_reason == "waiting_background"
    assert "Background jobs still running (1)" in rows[0] and "sleep 5" in rows[0]


def test_results_text_is_exactly_the_record(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    p = ScriptedProvider([calls(call("read", {"path": "a.txt"})), say("ok")])
    _, _, items, _, rows = run(drive(workspace, p, "r"))
    (tr,) = [i for i in items if i.kind == "tool_result"]
    assert tr.data["text"] == rows[0].text
    assert json.loads(json.dumps(tr.data))["outcome"] == "ok"


@pytest.mark.parametrize("mode", ["bogus"])
def test_an_unknown_mode_is_refused(workspace: Path, mode: str) -> None:
    async def go() -> None:
        async with zuno.Runtime(root=workspace) as rt:
            rt.agent(provider=ScriptedProvider([]), mode=mode)

    with pytest.raises(ValueError, match="plan, work, goal"):
        run(go())


class _PlanUpdate(Tool):
    name = "plan_update"
    description = "Change the plan."
    Args = ToolArgs

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        return ToolOutput(text="plan revision 1")


def test_plan_mode_required_instruction_becomes_maintain_after_a_plan_mutation(workspace: Path) -> None:
    reg = _registry_with(tools=(_PlanUpdate,))
    p = ScriptedProvider([calls(call("plan_update", {})), say("the plan is recorded")])
    result, *_ = run(drive(workspace, p, "plan it", mode="plan", registry=reg))
    assert result.stop_reason == "final"
    assert "Plan: Required" in p.requests[0].system and "Plan: Maintain" not in p.requests[0].system
    assert "Plan: Maintain" in p.requests[1].system


def test_a_completion_that_arrives_before_the_final_wakes_the_turn(workspace: Path) -> None:
    def script(req: ModelRequest, i: int) -> Reply:
        if i == 0:
            return calls(call("shell", {"command": "sleep 0.2; echo built", "run_in_background": True}))
        if i == 1:
            return say("x" * 20, chunks=20, chunk_delay=0.1)  # the job ends while this streams
        last = req.messages[-1]
        assert "job_completed" in getattr(last, "text", "")
        return say("seen the completion")

    p = ScriptedProvider(script)

    async def go() -> Any:
        overrides = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=p) as agent:
                return await agent.run("build"), agent.transcript.turns()

    result, turns = run(go())
    assert result.final_text == "seen the completion" and len(p.requests) == 3
    assert [t["stop_reason"] for t in turns] == ["final"]


def test_with_the_real_goal_and_plan_tools(workspace: Path) -> None:
    goal = {"action": "create", "objective": "ship", "criteria": [{"text": "tests pass"}]}
    p = ScriptedProvider([calls(call("goal_update", goal)), say("one"), say("two"), say("three"), say("four")])
    result, *_ = run(drive(workspace, p, "pursue the goal", mode="goal"))
    # The Goal section (from the state tools' refresher) keeps continuation while it is active;
    # three identical observations pause it.
    assert result.stop_reason == "no_progress" and len(p.requests) == 4
    assert "Goal (revision 1, active): ship" in p.requests[1].system
    # The Goal's own durable status says so too (the state family's observer paused it).
    from zuno.tools.state import read_goal

    async def stored_goal() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            return read_goal(rt.store, result.session)

    goal_now = run(stored_goal())
    assert goal_now["goal"]["status"] == "paused", goal_now
    assert goal_now["goal"]["pause_reason"]["kind"] == "no_progress", goal_now

    reads = ScriptedProvider(lambda req, i: calls(call("plan_get", {})))
    result, *_ = run(drive(workspace, reads, "look"))
    assert result.stop_reason == "stagnant_tool_loop" and result.steps == 3


def test_a_running_remote_observer_makes_the_stop_waiting_background(workspace: Path) -> None:
    observe = {"command": "sleep 5", "run_in_background": True, "backgroundPurpose": "remoteObserver"}
    p = ScriptedProvider([calls(call("shell", observe)), say("the CI run is being watched")])

    async def go() -> Any:
        overrides = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=p, wait_background=False) as agent:
                return await agent.run("watch the CI run"), rt.store.events(agent.id)

    result, events = run(go())
    assert result.stop_reason == "waiting_background" and "remote observer" in result.detail
    assert "backgroundPurpose remoteObserver" in p.requests[1].system
    assert any(e["kind"] == "waiting_background" for e in events)


SEEN_COMMITTED: dict[str, bool] = {}


def _committed_response_with(root: Path, call_id: str) -> bool:
    """Is a response holding this call committed (read by another connection, as a crash would)?"""
    import sqlite3

    db = sqlite3.connect(root / ".zuno" / "zuno.db")
    try:
        rows = db.execute("SELECT data FROM agent_items WHERE kind = 'assistant'").fetchall()
    finally:
        db.close()
    return any(call_id in [c["id"] for c in json.loads(r[0])["tool_calls"]] for r in rows)


class _Peek(Tool):
    name = "peek"
    description = "Look (read-only)."
    Args = ToolArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        SEEN_COMMITTED[ctx.call_id] = _committed_response_with(ctx.workspace.root, ctx.call_id)
        return ToolOutput(text="looked")


class _Poke(Tool):
    name = "poke"
    description = "Change something (side effects)."
    Args = ToolArgs

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        SEEN_COMMITTED[ctx.call_id] = _committed_response_with(ctx.workspace.root, ctx.call_id)
        return ToolOutput(text="changed")


def test_a_response_is_committed_before_any_call_with_an_effect_runs(workspace: Path) -> None:
    # A response asking for a call that may have an effect is durable before that call starts
    # (a crash during it leaves the call in the transcript, settled as uncertain on resume). A
    # response of read-only calls only is committed with their results, one commit less per step:
    # a crash before that loses a response whose calls may simply run again.
    SEEN_COMMITTED.clear()
    p = ScriptedProvider(
        [
            calls(call("peek", {}, id="c_peek_1"), call("peek", {}, id="c_peek_2")),
            calls(call("peek", {}, id="c_peek_3"), call("poke", {}, id="c_poke")),
            say("done", usage=Usage(300, 30, 3)),
        ]
    )
    p.script[0].usage = Usage(100, 10, 1)
    p.script[1].usage = Usage(200, 20, 2)
    result, _events, items, requests, _rows = run(drive(workspace, p, "go", tools=[_Peek(), _Poke()]))
    assert result.stop_reason == "final" and result.steps == 2, result
    assert [i.data["outcome"] for i in items if i.kind == "tool_result"] == ["ok"] * 4, items
    assert SEEN_COMMITTED == {"c_peek_1": False, "c_peek_2": False, "c_peek_3": True, "c_poke": True}
    # Everything is committed in the end, each response before its results, before the next request.
    kinds = [(i.kind, i.request_id or i.call_id) for i in items]
    assert kinds == [
        ("user", None),
        ("assistant", requests[0].id),
        ("tool_result", "c_peek_1"),
        ("tool_result", "c_peek_2"),
        ("assistant", requests[1].id),
        ("tool_result", "c_peek_3"),
        ("tool_result", "c_poke"),
        ("assistant", requests[2].id),
    ]
    assert all(r.status == "finished" and r.ended_at is not None for r in requests)
    assert all(_committed_response_with(workspace, c) for c in SEEN_COMMITTED)
    # Each request's row holds its outcome, whether it was written finished with its results (the
    # read-only step's) or written before its step and then finished (the others').
    assert [r.usage for r in requests] == [
        {"input_tokens": n * 100, "output_tokens": n * 10, "cached_tokens": n} for n in (1, 2, 3)
    ]
    assert [r.stop_reason for r in requests] == ["tool_calls", "tool_calls", "end_turn"]
    assert all(r.started_at <= r.ended_at for r in requests)


def test_a_read_only_step_costs_one_commit(workspace: Path) -> None:
    # The request's row, the response and the results ride in the transaction that settles the
    # step's calls: each further read-only step of a turn adds exactly one commit.
    (workspace / "a.txt").write_text("alpha\n")

    async def commits(steps: int) -> int:
        step = calls(call("read", {"path": "a.txt"}), call("glob", {"pattern": "*.txt"}))
        p = ScriptedProvider([*([step] * steps), say("done")])
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent(provider=p) as agent:
                seen: list[str] = []
                rt.store._db.set_trace_callback(lambda sql: seen.append(sql) if sql.strip() == "COMMIT" else None)
                result = await agent.run("read")
                rt.store._db.set_trace_callback(None)
                assert result.stop_reason == "final" and result.steps == steps
                items = agent.transcript.items()
                assert len([i for i in items if i.kind == "tool_result"]) == 2 * steps
                return len(seen)

    one, five = run(commits(1)), run(commits(5))
    assert five - one == 4


def test_a_steps_results_in_few_statements_keep_their_numbers(workspace: Path) -> None:
    # The result items of a step are inserted several rows per statement; the transcript's own
    # copy numbers them from the statement's last row id. A fresh reading of the database must see
    # exactly the same items, across more results than one statement takes.
    from zuno.agent.transcript import RESULT_ROWS_PER_STATEMENT, Transcript

    (workspace / "a.txt").write_text("alpha\n")
    n = RESULT_ROWS_PER_STATEMENT * 2 + 7
    p = ScriptedProvider(
        [
            calls(*(call("read", {"path": "a.txt"}, id=f"c_{i}") for i in range(n))),
            calls(call("read", {"path": "a.txt"}, id="c_last")),
            say("done"),
        ]
    )

    async def go() -> None:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent(provider=p) as agent:
                result = await agent.run("read")
                assert result.stop_reason == "final" and result.steps == 2, result
                mine = [(i.seq, i.kind, i.call_id, i.call_seq, i.step, i.data) for i in agent.transcript.items()]
                fresh = Transcript(rt.store, agent.id)
                theirs = [(i.seq, i.kind, i.call_id, i.call_seq, i.step, i.data) for i in fresh.items()]
                assert mine == theirs
                ids = [i.call_id for i in agent.transcript.items() if i.kind == "tool_result"]
                assert ids == [f"c_{i}" for i in range(n)] + ["c_last"]
                # The model saw every result, in call order, each its own.
                seen = [m.call_id for m in p.requests[1].messages if isinstance(m, ToolResultMessage)]
                assert seen == [f"c_{i}" for i in range(n)]

    run(go())

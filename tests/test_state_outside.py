"""The durable-state half tried from outside, the way users and real models use it: `zuno run` over
the loopback model server (real wire formats), `zuno call` with the inputs models really send,
`zuno goal resume`, the interactive `/goal resume`. Each test is a defect found by outside testing
(ninth round) and fails without its fix."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agent_double as ad
import zuno
from zuno.agent.types import ModelRequest
from zuno.tools.state import read_state

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply
from statehelp import call

SECRET = "sk-state-outside-7d1e"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def configure(root: Path, fake: FakeProvider, api: str = "openai-chat") -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    cfg: dict[str, Any] = {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": api,
                "options": {"baseURL": base, "apiKey": "{env:FAKE_KEY}"},
                "models": {"m1": {"context": 65536, "output": 2048}},
            }
        },
    }
    (root / "zuno.json").write_text(json.dumps(cfg))


def zuno_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        input="",
        capture_output=True,
        text=True,
        env=zuno_env({"FAKE_KEY": SECRET, "NO_COLOR": "1"}),
        timeout=90,
    )


def tool_results(req: Any) -> list[dict[str, Any]]:
    return [m for m in req.body["messages"] if m.get("role") == "tool"]


async def agent_run(
    root: Path, monkeypatch: pytest.MonkeyPatch, prompt: str, *, again: bool = False, **kw: Any
) -> Any:
    """One run of the in-process agent against the loopback server (the model zuno.json names)."""
    monkeypatch.setenv("FAKE_KEY", SECRET)
    overrides = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
    async with zuno.Runtime(root=root, config_overrides=overrides) as rt:
        async with rt.agent(continue_latest=again, **kw) as agent:
            return await agent.run(prompt)


async def seed(root: Path, *calls: tuple[str, dict[str, Any]]) -> str:
    """A session made by plain tool calls (as `zuno call` makes one); its id."""
    async with zuno.Runtime(root=root) as rt, rt.session() as s:
        for name, args in calls:
            rec = await call(s, name, args)
            assert rec.outcome == "ok", rec.text
        return s.id


async def state(root: Path, session: str) -> dict[str, Any]:
    async with zuno.Runtime(root=root) as rt:
        return read_state(rt.store, session)


# -- a provider that numbers the calls of every answer afresh ------------------------------------


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic"])
async def test_state_mutations_in_later_answers_apply_when_the_provider_reuses_call_ids(
    workspace: Path, fake: FakeProvider, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many compatible servers number the calls of each answer afresh (call_1 every time). The
    state tools take the call id as the delivery id, so the second todo_update was refused
    ChangedDelivery (an id the model cannot change), and an identical one in a later turn was
    taken for a repeated delivery: it reported ok and applied nothing."""
    configure(workspace, fake, api)
    add = {"action": "add", "items": [{"title": "a"}]}
    fake.script(
        Reply(calls=[Call("todo_update", json.dumps(add), id="call_1")]),
        Reply(calls=[Call("todo_update", json.dumps({"action": "add", "expected_revision": 1,
                                                       "items": [{"title": "b"}]}), id="call_1")]),
        Reply(calls=[Call("todo_update", json.dumps({"action": "patch", "expected_revision": 2,
                                                       "items": [{"id": "t1", "status": "completed"}]}),
                          id="call_1")]),
        Reply(text="done"),
    )
    out = await agent_run(workspace, monkeypatch, "make todos")
    assert out.stop_reason == "final"
    todos = (await state(workspace, out.session))["todo"]
    assert todos["revision"] == 3
    assert [(t["title"], t["status"]) for t in todos["todos"]] == [("a", "completed"), ("b", "pending")]
    # The results the model saw are successes, each paired with its own (now distinct) call id.
    last = fake.requests[-1]
    if api == "openai-chat":
        results = tool_results(last)
        assert len({r["tool_call_id"] for r in results}) == 3
        assert not any("refused" in r["content"] for r in results)
    elif api == "openai-responses":
        outputs = [i["call_id"] for i in last.body["input"] if i.get("type") == "function_call_output"]
        calls_ = [i["call_id"] for i in last.body["input"] if i.get("type") == "function_call"]
        assert len(set(outputs)) == 3 and outputs == calls_
    else:
        ids = [b["tool_use_id"] for m in last.body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
        assert len(ids) == len(set(ids)) == 3


async def test_an_identical_call_with_a_reused_id_in_a_later_turn_is_not_a_silent_replay(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(workspace, fake)
    create = json.dumps({"action": "create", "objective": "o", "steps": [{"title": "a"}]})
    fake.script(Reply(calls=[Call("plan_update", create, id="call_1")]), Reply(text="made"))
    first = await agent_run(workspace, monkeypatch, "plan it")
    fake.script(
        Reply(calls=[Call("plan_update", json.dumps({"action": "append", "expected_revision": 1,
                                                       "steps": [{"title": "b"}]}), id="call_1")]),
        Reply(text="appended"),
    )
    await agent_run(workspace, monkeypatch, "add a step", again=True)
    plan = (await state(workspace, first.session))["plan"]
    assert plan["revision"] == 2 and [s["title"] for s in plan["plan"]["steps"]] == ["a", "b"]


# -- the user resumes a paused Goal ----------------------------------------------------------------


async def test_a_goal_paused_for_no_progress_is_resumed_by_the_user_and_goal_mode_continues(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every refusal and doc told the user to '/goal resume' a paused Goal, but no command did:
    after a no_progress pause the Goal stayed paused for good (Goal mode never continued again,
    and only a model replacing the Goal could get out of it)."""
    configure(workspace, fake)
    goal = json.dumps({"action": "create", "objective": "ship it", "criteria": [{"text": "done"}]})
    fake.script(Reply(calls=[Call("goal_update", goal)]), Reply(text="one"), Reply(text="two"), Reply(text="three"))
    out = await agent_run(workspace, monkeypatch, "go", mode="goal")
    sid = out.session
    assert out.stop_reason == "no_progress" and "zuno goal resume" in out.detail  # what `zuno run` prints
    assert (await state(workspace, sid))["goal"]["goal"]["pause_reason"]["kind"] == "no_progress"
    p = zuno_cli(workspace, "goal", "resume", "--session", sid)
    assert p.returncode == 0, p.stderr
    assert "Goal resumed" in p.stdout and f"zuno resume {sid}" in p.stdout
    resumed = (await state(workspace, sid))["goal"]
    assert resumed["goal"]["status"] == "active" and "pause_reason" not in resumed["goal"]
    # Resuming again changes nothing and says why (exit 1).
    again = zuno_cli(workspace, "goal", "resume", "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["resumed"] is False
    assert "active, not paused" in json.loads(again.stdout)["message"]
    # The resumed Goal is continued again, its count started afresh (three more finals to pause).
    fake.script(Reply(text="four"), Reply(text="five"), Reply(text="six"))
    out = await agent_run(workspace, monkeypatch, "keep going", again=True)
    assert out.stop_reason == "no_progress" and out.final_text == "six"
    sysmsg = fake.requests[-3].body["messages"][0]["content"]
    assert "Goal (revision 3, active): ship it" in sysmsg


async def test_goal_resume_without_a_goal_or_a_session_says_so(workspace: Path) -> None:
    p = zuno_cli(workspace, "goal", "resume")
    assert p.returncode == 2 and "no session to continue" in p.stderr and "Traceback" not in p.stderr
    await seed(workspace, ("plan_get", {}))
    p = zuno_cli(workspace, "goal", "resume")
    assert p.returncode == 1 and "has no Goal: nothing to resume" in p.stderr


async def test_slash_goal_resume_in_the_interactive_session(workspace: Path, fake: FakeProvider) -> None:
    from test_run_terminal import Pty

    configure(workspace, fake)
    sid = await seed(
        workspace,
        ("goal_update", {"action": "create", "objective": "g", "criteria": [{"text": "c"}]}),
        ("goal_update", {"action": "pause", "expected_revision": 1, "reason": {"kind": "user_requested"}}),
    )
    term = Pty(workspace, "--continue")
    term.until(b"zuno> ")
    term.write(b"/goal resume\r")
    term.until(b"Goal resumed")
    term.write(b"/goal resume\r")
    term.until(b"not paused")
    term.write(b"/exit\r")
    assert term.finish() == 0
    assert fake.requests == []  # nothing was sent to the model
    assert (await state(workspace, sid))["goal"]["goal"]["status"] == "active"


async def test_a_model_cannot_replace_a_paused_goal_to_get_out_of_the_pause(workspace: Path) -> None:
    """goal_update create over a paused Goal made a new active one: the model resumed itself."""
    create = {"action": "create", "objective": "g", "criteria": [{"text": "c"}]}
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "goal_update", create)
        await call(s, "goal_update", {"action": "pause", "expected_revision": 1,
                                      "reason": {"kind": "blocked", "detail": "no key"}})
        rec = await call(s, "goal_update", {**create, "expected_revision": 2})
        assert rec.metadata["refusal"]["kind"] == "GoalPaused"
        assert "zuno goal resume" in rec.text and "abandon" in rec.text
        assert read_state(rt.store, s.id)["goal"]["goal"]["status"] == "paused"
        # Abandoning it first is the model's way to a new objective.
        await call(s, "goal_update", {"action": "abandon", "expected_revision": 2, "reason": "obsolete"})
        rec = await call(s, "goal_update", {**create, "expected_revision": 3})
        assert rec.outcome == "ok", rec.text


# -- a mutation that changes nothing ---------------------------------------------------------------


async def test_a_patch_that_changes_nothing_keeps_the_revision_and_the_fingerprint(workspace: Path) -> None:
    """A status set to itself, or a patch naming only an id, wrote a new revision: plan_get's
    progressFingerprint changed with nothing changed, and the model's next expected_revision had
    to follow a change that never happened."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": [{"title": "a"}]})
        await call(s, "todo_update", {"action": "add", "items": [{"title": "t", "status": "in_progress"}]})
        before = (await call(s, "plan_get")).metadata["progressFingerprint"]
        for args in ({"id": "s1", "status": "pending"}, {"id": "s1"}, {"id": "s1", "title": "a"}):
            rec = await call(s, "plan_update", {"action": "patch", "expected_revision": 1, "steps": [args]})
            assert rec.outcome == "ok" and rec.metadata["revision"] == 1, rec.text
            assert rec.text.startswith("[plan patch: revision 1 · nothing changed")
        assert (await call(s, "plan_get")).metadata["progressFingerprint"] == before
        rec = await call(s, "todo_update",
                         {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "status": "in_progress"}]})
        assert rec.outcome == "ok" and rec.metadata["revision"] == 1
        # A real change still makes a new revision.
        rec = await call(s, "plan_update",
                         {"action": "patch", "expected_revision": 1, "steps": [{"id": "s1", "status": "in_progress"}]})
        assert rec.metadata["revision"] == 2 and "nothing changed" not in rec.text


async def test_no_op_updates_every_cycle_do_not_defeat_no_progress(workspace: Path) -> None:
    """A model that re-sends the same status each cycle looked like progress to the Goal's
    fingerprint (a new revision every time): the Goal never paused with no_progress and the turn
    ran to the continuation limit."""
    def script(req: ModelRequest, i: int) -> Any:
        if i == 0:
            return ad.calls(
                ad.call("goal_update", {"action": "create", "objective": "g", "criteria": [{"text": "c"}]}),
                ad.call("plan_update", {"action": "create", "objective": "p",
                                     "steps": [{"title": "a", "status": "in_progress"}]}),
            )
        if i % 2 == 1:  # every cycle: the same status again, at the revision the context shows
            rev = int(re.search(r"Plan \(revision (\d+);", req.system).group(1))  # type: ignore[union-attr]
            return ad.calls(ad.call("plan_update", {"action": "patch", "expected_revision": rev,
                                              "steps": [{"id": "s1", "status": "in_progress"}]}))
        return ad.say("still on it")

    overrides = {"agent": {"limits": {"continuations": 8}}}
    async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
        async with rt.agent(provider=ad.ScriptedProvider(script), mode="goal") as agent:
            result = await agent.run("pursue it")
    assert result.stop_reason == "no_progress", result.detail


# -- refusals in the model's terms -----------------------------------------------------------------


async def test_todo_refusals_name_the_todo_action_and_a_twice_named_item(workspace: Path) -> None:
    """A patch of a Todo list that does not exist said 'Create it first (action create)' —
    todo_update has no action create; and a patch naming t1 twice was refused as an invalid
    transition of a 'completed (terminal)' item that was in fact pending."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        rec = await call(s, "todo_update",
                         {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "status": "completed"}]})
        assert rec.metadata["refusal"]["kind"] == "NotFound"
        assert "action add" in rec.text and "action create" not in rec.text
        rec = await call(s, "plan_update", {"action": "patch", "expected_revision": 1, "steps": [{"id": "s1"}]})
        assert "action create" in rec.text  # the Plan's own creating action
        await call(s, "todo_update", {"action": "add", "items": [{"title": "a"}, {"title": "b", "depends_on": ["t1"]}]})
        rec = await call(s, "todo_update", {"action": "patch", "expected_revision": 1, "items": [
            {"id": "t1", "status": "completed"}, {"id": "t1", "status": "cancelled"}]})
        assert rec.metadata["refusal"]["kind"] == "DuplicateTodo" and "t1 is named twice" in rec.text
        rec = await call(s, "todo_update", {"action": "remove", "expected_revision": 1, "ids": ["t1"]})
        assert "t2 depends on an item being removed" in rec.text


# -- automatic continuation requires runnable work -------------------------------------------------


async def _goal_turn(
    root: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, prompt: str, again: bool = False
) -> Any:
    """One Goal-mode run of the in-process agent against the loopback server (zuno.json's model)."""
    monkeypatch.setenv("FAKE_KEY", SECRET)
    overrides = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
    async with zuno.Runtime(root=root, config_overrides=overrides) as rt:
        async with rt.agent(mode="goal", wait_background=False, continue_latest=again) as agent:
            return await agent.run(prompt)


async def test_a_goal_whose_only_work_is_blocked_is_not_continued(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'An unowned Plan or blocked Todo alone is insufficient': the active Goal counted as runnable
    work by itself, so a Goal whose one Todo was blocked was continued answer after answer and
    then paused as no_progress — the user saw 'no progress' for work that was plainly blocked."""
    configure(workspace, fake)
    goal = json.dumps({"action": "create", "objective": "ship", "criteria": [{"text": "released"}]})
    todo = json.dumps({"action": "add", "items": [{"title": "wait for the key", "status": "blocked"}]})
    fake.script(Reply(calls=[Call("goal_update", goal), Call("todo_update", todo)]),
                Reply(text="blocked: I need the signing key"))
    result = await _goal_turn(workspace, fake, monkeypatch, "release it")
    assert result.stop_reason == "final" and result.final_text == "blocked: I need the signing key"
    assert len(fake.requests) == 2
    assert (await state(workspace, result.session))["goal"]["goal"]["status"] == "active"
    # An unowned pending Plan is no runnable work either; adopting a step (in_progress) is.
    plan = json.dumps({"action": "create", "objective": "p", "steps": [{"title": "sign"}]})
    adopt = json.dumps({"action": "patch", "expected_revision": 1, "steps": [{"id": "s1", "status": "in_progress"}]})
    fake.script(Reply(calls=[Call("plan_update", plan)]), Reply(text="planned"),
                Reply(calls=[Call("plan_update", adopt)]), Reply(text="signing"), Reply(text="signing"),
                Reply(text="signing"))
    result = await _goal_turn(workspace, fake, monkeypatch, "plan it", again=True)
    assert result.stop_reason == "final" and result.final_text == "planned"
    result = await _goal_turn(workspace, fake, monkeypatch, "start", again=True)
    assert result.stop_reason == "no_progress" and fake.pending == 0
    assert "Goal continuation" in json.dumps(fake.requests[-1].body)


async def test_a_running_background_job_is_waited_for_not_bypassed_by_a_goal_continuation(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'does not bypass ... unsettled Jobs': with a build running in the background the Goal was
    continued anyway — the model was asked again and again while the job ran, and the Goal was
    paused as no_progress before the build had even finished."""
    configure(workspace, fake)
    goal = json.dumps({"action": "create", "objective": "ship", "criteria": [{"text": "built"}]})
    plan = json.dumps({"action": "create", "objective": "p", "steps": [{"title": "build", "status": "in_progress"}]})
    build = json.dumps({"command": "sleep 5; echo built", "run_in_background": True})
    fake.script(Reply(calls=[Call("goal_update", goal), Call("plan_update", plan)]),
                Reply(calls=[Call("shell", build)]), Reply(text="waiting for the build"),
                Reply(text="a"), Reply(text="b"), Reply(text="c"))
    result = await _goal_turn(workspace, fake, monkeypatch, "build it")
    assert result.stop_reason == "waiting_background", result.detail
    assert result.final_text == "waiting for the build" and len(fake.requests) == 3
    assert (await state(workspace, result.session))["goal"]["goal"]["status"] == "active"


async def test_plan_mode_says_maintain_when_the_plan_was_made_outside_the_loop(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Plan made by `zuno call` (or MCP, or batch) in the session still got 'Plan: Required ...
    plan_update (action create)' in Plan mode: the model was told to replace a Plan that exists."""
    configure(workspace, fake)
    monkeypatch.setenv("FAKE_KEY", SECRET)
    fake.script(Reply(text="the plan stands"))
    async with zuno.Runtime(root=workspace) as rt:
        async with rt.session() as s:
            await call(s, "plan_update", {"action": "create", "objective": "o", "steps": [{"title": "a"}]})
            sid = s.id
        async with rt.agent(mode="plan", session_id=sid) as agent:
            result = await agent.run("review the plan")
    assert result.stop_reason == "final"
    system = fake.requests[0].body["messages"][0]["content"]
    assert "Plan: Maintain." in system and "Plan: Required." not in system


# -- what a person sees ----------------------------------------------------------------------------


async def test_zuno_plan_goal_and_show_print_escape_sequences_as_symbols(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step title or a model answer holding terminal escapes (clear the screen, set the window
    title) or a carriage return and newline (a forged line) was printed raw by zuno plan and zuno
    show: the terminal obeyed it. Now each shows as its control picture, one line per entry;
    --json still has the exact text."""
    configure(workspace, fake)
    title = "x\u001b[2J\u001b[31mRED\r\n  s9 [completed] forged"
    create = json.dumps({"action": "create", "objective": "o\u001b]0;pwned\u0007", "steps": [{"title": title}]})
    goal = json.dumps({"action": "create", "objective": "g", "criteria": [{"text": "c"}]})
    pause = json.dumps({"action": "pause", "expected_revision": 1, "reason": {"kind": "blocked", "detail": "no key"}})
    fake.script(Reply(calls=[Call("plan_update", create), Call("goal_update", goal)]),
                Reply(calls=[Call("goal_update", pause)]), Reply(text="made \u001b[2J\u0007"))
    sid = (await agent_run(workspace, monkeypatch, "plan")).session
    plan = zuno_cli(workspace, "plan", "--session", sid)
    assert "\x1b" not in plan.stdout and "\x07" not in plan.stdout and "\r" not in plan.stdout
    assert "o\u241b]0;pwned\u2407" in plan.stdout and "x\u241b[2J\u241b[31mRED\u240d\u2424  s9" in plan.stdout
    assert len(plan.stdout.splitlines()) == 4  # session, head, plan, one step: no forged line
    assert (await state(workspace, sid))["plan"]["plan"]["steps"][0]["title"] == title
    show = zuno_cli(workspace, "show", sid)
    assert "\x1b" not in show.stdout and "made \u241b[2J\u2407" in show.stdout
    g = zuno_cli(workspace, "goal", "--session", sid).stdout
    assert "paused (blocked — no key)" in g and "zuno goal resume" in g


async def test_blank_titles_and_objectives_are_refused_naming_the_field(workspace: Path) -> None:
    """A title of spaces (what a model sends when it has nothing to say) passed min_length and
    made a step, a Todo, a Goal nobody can read."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        cases = [
            ("plan_update", {"action": "create", "objective": "  ", "steps": [{"title": "\n\t"}]}, "objective"),
            ("todo_update", {"action": "add", "items": [{"title": " "}]}, "items.0.title"),
            ("goal_update", {"action": "create", "objective": "g", "criteria": [{"text": "   "}]}, "criteria.0.text"),
        ]
        for name, args, field in cases:
            rec = await call(s, name, args)
            assert rec.outcome == "blocked" and f"argument '{field}' must not be blank" in rec.text, rec.text
        assert (await call(s, "todo_update", {"action": "add", "items": [{"title": "a b"}]})).outcome == "ok"


async def test_evidence_cited_as_the_shell_shows_it_is_the_receipt_id(workspace: Path) -> None:
    """shell shows '[verification rcp_…]' and the refusal told the model to 'cite the
    [verification rcp_…] id'; a model that copied the bracket (or the id with a space) was refused
    as 'not a verification receipt id'."""
    overrides = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
    async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt, rt.session() as s:
        criteria = [{"text": "tests pass", "requires_evidence": True}, {"text": "lint", "requires_evidence": True}]
        await call(s, "goal_update", {"action": "create", "objective": "g", "criteria": criteria})
        shell = await call(s, "shell", {"command": "true"})
        rid = re.search(r"\[verification (rcp_\w+)\]", shell.text).group(1)  # type: ignore[union-attr]
        rec = await call(s, "goal_update", {"action": "satisfy", "expected_revision": 1, "criterion_id": "c1",
                                            "evidence": f"[verification {rid}]"})
        assert rec.outcome == "ok", rec.text
        rec = await call(s, "goal_update", {"action": "satisfy", "expected_revision": 2, "criterion_id": "c2",
                                            "evidence": f" {rid}\n"})
        assert rec.outcome == "ok", rec.text
        goal = await call(s, "goal_get")
        assert [c["evidence"] for c in json.loads(goal.text)["goal"]["criteria"]] == [rid, rid]
        # Anything else is still refused, naming what was sent.
        await call(s, "goal_update", {"action": "add_criteria", "expected_revision": 3,
                                      "criteria": [{"text": "docs", "requires_evidence": True}]})
        rec = await call(s, "goal_update", {"action": "satisfy", "expected_revision": 4, "criterion_id": "c3",
                                            "evidence": f"see {rid}"})
        assert rec.metadata["refusal"]["kind"] == "EvidenceRejected" and f"'see {rid}'" in rec.text


async def test_zuno_show_ends_with_the_sessions_state_as_it_is_now(workspace: Path) -> None:
    """zuno show listed the transcript only: the Goal, Plan and Todo as they stand (a Goal paused
    by the host, a Plan changed by `zuno call`) were nowhere but in old tool results."""
    steps = [{"title": "a", "status": "in_progress"}, {"title": "b"}]
    sid = await seed(
        workspace,
        ("plan_update", {"action": "create", "objective": "o\nforged", "steps": steps}),
        ("goal_update", {"action": "create", "objective": "g", "criteria": [{"text": "c"}, {"text": "d"}]}),
        ("goal_update", {"action": "pause", "expected_revision": 1, "reason": {"kind": "blocked"}}),
    )
    p = zuno_cli(workspace, "show", sid)
    assert p.returncode == 0, p.stderr
    tail = p.stdout.split("── state now", 1)[1].splitlines()
    assert tail[1] == "goal (revision 2, paused (blocked)): g · 0/2 criteria"
    assert tail[2] == "plan (revision 1): o\u2424forged · 0/2 steps done · in progress s1"
    assert len(tail) == 3  # no Todo list: no line; a newline in a title forges none


async def test_goal_mode_without_a_goal_tells_the_model_to_create_one(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`zuno run --mode goal "…"` in a session with no Goal told the model to 'pursue the active
    Goal' that did not exist: nothing was created, nothing continued, Goal mode was Work mode."""
    configure(workspace, fake)
    goal = json.dumps({"action": "create", "objective": "g", "criteria": [{"text": "c"}]})
    fake.script(Reply(calls=[Call("goal_update", goal)]), *[Reply(text="working") for _ in range(3)])
    monkeypatch.setenv("FAKE_KEY", SECRET)
    async with zuno.Runtime(root=workspace) as rt:
        async with rt.agent(mode="goal") as agent:
            assert (await agent.run("make the tests pass")).stop_reason == "no_progress"
    first, second = (r.body["messages"][0]["content"] for r in fake.requests[:2])
    assert "Goal: none yet. Create it from the user's request with goal_update (action create" in first
    assert "Goal: none yet" not in second and "Goal (revision 1, active): g" in second


async def test_todo_write_without_ids_keeps_the_items_it_names_by_their_text(workspace: Path) -> None:
    """Models used to other harnesses send the whole list as content and status only. Each such
    write made every item new: ids churned (t1, t2 → t3, t4), an identical list was a new revision,
    and a completed item sent back as pending became a new pending item — the terminal rule
    bypassed."""
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        todos = [{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]
        first = await call(s, "todo_write", {"todos": todos})
        again = await call(s, "todo_write", {"todos": todos})
        assert first.metadata["revision"] == again.metadata["revision"] == 1
        assert "nothing changed" in again.text
        rec = await call(s, "todo_write", {"todos": [{"content": "a", "status": "completed"},
                                                     {"content": "b", "status": "completed"}, {"content": "c"}]})
        assert [(t["id"], t["status"]) for t in read_state(rt.store, s.id)["todo"]["todos"]] == [
            ("t1", "completed"), ("t2", "completed"), ("t3", "pending")]
        rec = await call(s, "todo_write", {"todos": [{"content": "a", "status": "pending"}]})
        assert rec.metadata["refusal"]["kind"] == "InvalidTransition" and "t1 is completed" in rec.text
        # Two items of the same text are matched in order; an explicit id still wins.
        await call(s, "todo_write", {"todos": [{"content": "x"}, {"content": "x"}]})
        pair = [{"content": "x", "id": "t5"}, {"content": "x", "status": "in_progress"}]
        rec = await call(s, "todo_write", {"todos": pair})
        assert [(t["id"], t["status"]) for t in read_state(rt.store, s.id)["todo"]["todos"]] == [
            ("t5", "pending"), ("t4", "in_progress")]


async def test_zuno_plan_and_show_print_bidi_controls_visibly(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside testing (twelfth round): a step title or a model answer holding Unicode bidi
    overrides/isolates/marks (the "Trojan Source" trick) was printed raw by zuno plan and zuno show,
    so what a person read was visually reordered. Now each shows as <U+XXXX>; --json has the exact text."""
    configure(workspace, fake)
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    title = "rm -rf \u202e/ tsil\u202c \u2066safe\u2069 \u001b[31mred"
    create = json.dumps({"action": "create", "objective": f"o{bidi}", "steps": [{"title": title}]})
    fake.script(Reply(calls=[Call("plan_update", create)]), Reply(text="done \u202eevil\u202c \u001b[2J"))
    sid = (await agent_run(workspace, monkeypatch, "plan")).session
    plan = zuno_cli(workspace, "plan", "--session", sid)
    show = zuno_cli(workspace, "show", sid)
    for out in (plan.stdout, show.stdout):
        assert not any(ch in out for ch in bidi + "\x1b"), out
    assert "o<U+202A><U+202B><U+202C><U+202D><U+202E><U+2066><U+2067><U+2068><U+2069><U+200E><U+200F><U+061C>" in (
        plan.stdout
    )
    assert "rm -rf <U+202E>/ tsil<U+202C> <U+2066>safe<U+2069> \u241b[31mred" in plan.stdout
    assert "done <U+202E>evil<U+202C> \u241b[2J" in show.stdout
    exact = json.loads(zuno_cli(workspace, "plan", "--session", sid, "--json").stdout)
    assert exact["plan"]["objective"] == f"o{bidi}" and exact["plan"]["steps"][0]["title"] == title
    shown = json.loads(zuno_cli(workspace, "show", sid, "--json").stdout)
    assert any(i["data"].get("text") == "done \u202eevil\u202c \u001b[2J" for i in shown["items"])

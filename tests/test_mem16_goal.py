"""Memory and goal (sixteenth round), the Goal: a Goal waiting for the user's input is not resumed as
if it were any pause, and a resume that loses a race says so to a person, not to the model."""

from __future__ import annotations

import json
from pathlib import Path

import zuno
from zuno.tools.state import goal

from conftest import zuno_cli
from statehelp import call


async def _goal_waiting_for_input(workspace: Path, detail: str | None = "which database, sqlite or postgres?") -> str:
    """A session whose Goal the host paused waiting_input (as a required-input request would)."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        rec = await call(s, "goal_update", {"action": "create", "objective": "ship", "criteria": [{"text": "done"}]})
        assert rec.outcome == "ok", rec.text
        pause = goal.HostPause(
            action="pause", expected_revision=1, reason=goal.PauseReason(kind="waiting_input", detail=detail)
        )
        goal.host_update(rt.store, s.id, pause, "host-pause-1")
        return s.id


def _goal_now(workspace: Path, sid: str) -> dict:
    rt = zuno.Runtime(root=workspace)
    try:
        return rt.state(sid)["goal"]
    finally:
        rt.store.close()


async def test_a_goal_waiting_for_input_is_not_resumed_without_the_input(workspace: Path) -> None:
    sid = await _goal_waiting_for_input(workspace)
    p = zuno_cli(workspace, "goal", "resume", "--session", sid)
    assert p.returncode == 1, p
    assert "waiting for your input (which database, sqlite or postgres?)" in p.stderr, p.stderr
    assert "zuno goal resume --input" in p.stderr and "Traceback" not in p.stderr
    shown = zuno_cli(workspace, "goal", "--session", sid)
    assert "it waits for your input: zuno goal resume --input" in shown.stdout, shown.stdout
    now = _goal_now(workspace, sid)
    assert now["revision"] == 2 and now["goal"]["status"] == "paused"  # nothing changed
    assert now["goal"]["pause_reason"]["kind"] == "waiting_input"


async def test_the_input_resumes_it_and_reaches_the_model(workspace: Path) -> None:
    sid = await _goal_waiting_for_input(workspace)
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "   ")
    assert p.returncode == 2 and "--input is blank" in p.stderr, p
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "postgres 16")
    assert p.returncode == 0 and "Goal resumed with your answer" in p.stdout, p
    now = _goal_now(workspace, sid)
    assert now["goal"]["status"] == "active" and "pause_reason" not in now["goal"]
    assert now["goal"]["input_answer"] == {"asked": "which database, sqlite or postgres?", "answer": "postgres 16"}
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:  # the model reads it
        got = json.loads((await call(s, "goal_get")).text)
        assert got["goal"]["input_answer"]["answer"] == "postgres 16"
        from zuno.tools.state.projection import goal_section

        section = goal_section(rt.store, sid)
        assert section is not None and "postgres 16" in section.text


async def test_an_answer_to_a_goal_not_waiting_for_one_is_refused(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "goal_update", {"action": "create", "objective": "o", "criteria": [{"text": "c"}]})
        await call(s, "goal_update", {"action": "pause", "expected_revision": 1, "reason": {"kind": "blocked"}})
        sid = s.id
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "yes")
    assert p.returncode == 1 and "not waiting for input" in p.stderr, p
    assert _goal_now(workspace, sid)["goal"]["status"] == "paused"
    p = zuno_cli(workspace, "goal", "resume", "--session", sid)  # any other pause: resumed as before
    assert p.returncode == 0 and "Goal resumed" in p.stdout, p

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


async def test_a_resume_that_loses_a_race_says_so_to_a_person(workspace: Path) -> None:
    """Another resume (a second terminal) commits between this one's read and its write: a real
    second connection to the same database, its write made at the moment this resume begins its
    transaction — the race, made to happen every time."""
    from contextlib import contextmanager

    from zuno.commands.goal_resume import refusal_for_a_person, resume_paused_goal
    from zuno.store import Store
    from zuno.tools.state import docstore

    class RacedStore(Store):
        rival: object = None

        @contextmanager
        def transaction(self):  # type: ignore[override]
            rival, self.rival = self.rival, None
            if rival is not None:
                rival()
            with super().transaction() as db:
                yield db

    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "goal_update", {"action": "create", "objective": "o", "criteria": [{"text": "c"}]})
        await call(s, "goal_update", {"action": "pause", "expected_revision": 1, "reason": {"kind": "blocked"}})
        raced = RacedStore(rt.store.path, rt._migrations)
        try:
            raced.rival = lambda: goal.resume_goal(rt.store, s.id, 2, "the-other-terminal")
            done = resume_paused_goal(raced, s.id)
        finally:
            raced.close()
        assert not done.ok
        assert "the Goal changed while it was being resumed" in done.message, done.message
        assert f"zuno goal --session {s.id}" in done.message
        assert "goal_get" not in done.message and "expected_revision" not in done.message  # the model's advice
        now = docstore.read(rt.store, goal.scope_of(s.id), goal.KIND)
        assert (now.revision, now.body["status"]) == (3, "active")  # the rival's resume, applied once
    # the mapping itself: a StaleRevision becomes a person's message; anything else keeps its words
    stale = docstore.stale("Goal", 2, 3, "goal_get")
    assert "Call goal_get" not in refusal_for_a_person(stale, "ses_x")
    other = goal.waiting_for_input("which one?")
    assert refusal_for_a_person(other, "ses_x") == f"{other.message} {other.required_action}"

"""zuno plan / goal / todo print a session's state, read-only; the Python read API."""

from __future__ import annotations

import json
from pathlib import Path

import zuno
from zuno.tools.state import read_state

from conftest import RunZuno
from statehelp import call


async def _seed(workspace: Path) -> str:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "ship", "steps": [{"title": "build"}]})
        await call(
            s,
            "plan_update",
            {
                "action": "push",
                "expected_revision": 1,
                "step_id": "s1",
                "objective": "deps",
                "steps": [{"title": "pin", "status": "in_progress"}],
            },
        )
        await call(s, "todo_update", {"action": "add", "items": [{"title": "a"}, {"title": "b", "depends_on": ["t1"]}]})
        await call(
            s,
            "goal_update",
            {"action": "create", "objective": "green", "criteria": [{"text": "tests pass", "requires_evidence": True}]},
        )
        state = read_state(rt.store, s.id)
        assert state["plan"]["revision"] == 2 and state["todo"]["revision"] == 1 and state["goal"]["revision"] == 1
        return s.id


async def test_the_commands_print_the_state_and_write_nothing(workspace: Path, run_zuno: RunZuno) -> None:
    sid = await _seed(workspace)
    db = workspace / ".zuno" / "zuno.db"
    before = db.stat().st_mtime_ns, db.stat().st_size
    p = run_zuno("plan", "--session", sid)
    assert p.returncode == 0, p.stderr
    assert "s1 [pending] build" in p.stdout and "p2: deps" in p.stdout and "s2 [in_progress] pin (main)" in p.stdout
    p = run_zuno("todo", "--continue")
    assert p.returncode == 0 and "t2 [pending] b after t1" in p.stdout
    p = run_zuno("goal")
    assert p.returncode == 0 and "Goal (revision 1, active): green" in p.stdout and "requires evidence" in p.stdout
    for kind, key in (("plan", "plan"), ("goal", "goal"), ("todo", "todos")):
        p = run_zuno(kind, "--session", sid, "--json")
        assert p.returncode == 0
        got = json.loads(p.stdout)
        assert got["session"] == sid and got[key] is not None
    assert (db.stat().st_mtime_ns, db.stat().st_size) == before
    p = run_zuno("plan", "--session", "ses_nope")
    assert p.returncode == 2 and "no session 'ses_nope'" in p.stderr
    p = run_zuno("plan", "--session", "../x")
    assert p.returncode == 2 and "not valid" in p.stderr


def test_no_store_is_created(tmp_path: Path, run_zuno: RunZuno) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for kind in ("plan", "goal", "todo"):
        p = run_zuno(kind, "--root", str(empty))
        assert p.returncode == 2 and "no store yet" in p.stderr
    assert list(empty.iterdir()) == []


def test_the_tools_are_listed_with_their_declarations(run_zuno: RunZuno) -> None:
    p = run_zuno("tools", "--json")
    tools = {t["name"]: t for t in json.loads(p.stdout)["tools"]}
    for name in ("plan_get", "plan_update", "todo_get", "todo_update", "goal_get", "goal_update"):
        assert name in tools
    assert tools["plan_update"]["inputSchema"]["required"] == ["action"]
    p = run_zuno("tools", "--json", "--profile", "chord")
    assert "todo_write" in {t["name"] for t in json.loads(p.stdout)["tools"]}

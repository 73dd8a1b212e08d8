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


async def test_two_cli_processes_on_one_session_exactly_one_append_wins(workspace: Path) -> None:
    import asyncio
    import sys

    from conftest import zuno_env

    sid = await _seed(workspace)
    args = json.dumps({"action": "append", "expected_revision": 2, "steps": [{"title": "racing"}]})
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "zuno",
            "call",
            "plan_update",
            args,
            "--session",
            sid,
            "--json",
            cwd=workspace,
            env=zuno_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outs = [await p.communicate() for p in procs]
    recs = [json.loads(o) if o.strip() else None for o, _ in outs]
    won = [r for r in recs if r is not None and r["outcome"] == "ok"]
    assert len(won) == 1, outs
    (loser,) = [(r, err) for r, (_, err) in zip(recs, outs, strict=True) if r is None or r["outcome"] != "ok"]
    if loser[0] is not None:  # ran after the winner: a typed stale refusal naming the current revision
        refusal = loser[0]["metadata"]["refusal"]
        assert refusal["kind"] == "StaleRevision" and refusal["currentRevision"] == 3
    else:  # ran while the winner held the session
        assert b"being driven by another process" in loser[1]
    async with zuno.Runtime(root=workspace) as rt:
        steps = rt.state(sid)["plan"]["plan"]["steps"][0]["children"][0]["steps"]
        assert [s["title"] for s in steps].count("racing") == 1


def test_zuno_tools_lists_the_mixed_tools_by_action(run_zuno: RunZuno) -> None:
    p = run_zuno(
        "tools",
        "--json",
        env={"ZUNO_CONFIG_CONTENT": json.dumps({"continuity": {"enabled": True}, "tools": {"task_context": True}})},
    )
    tools = {t["name"]: t for t in json.loads(p.stdout)["tools"]}
    assert tools["notes"]["classifiedBy"] == "action"
    assert tools["notes"]["actionEffects"] == {
        "list_files_by_prefix": "ReadOnly",
        "read_file": "ReadOnly",
        "search_contents": "ReadOnly",
        "append_to_file": "SideEffecting",
        "write_file": "SideEffecting",
    }
    assert set(tools["history"]["actionEffects"].values()) == {"ReadOnly"}
    assert tools["task_context"]["actionEffects"] == {
        "get": "ReadOnly",
        "update": "SideEffecting",
        "replace": "SideEffecting",
    }

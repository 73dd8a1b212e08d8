"""`zuno sessions prune` / `Runtime.prune_sessions`: an old session's every row and file goes, its
reports and the workspace's memory stay, a session another process drives is kept, and a dry run or
a bad request changes nothing."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import zuno
from agent_double import ScriptedProvider, call, calls, say
from zuno.session_pruning import SESSION_DIRS, choose, prune_sessions

from conftest import RunZuno, batch, zuno_env

MEMORY = {"memory": {"enabled": True}}


def _db(workspace: Path) -> sqlite3.Connection:
    return sqlite3.connect(workspace / ".zuno" / "zuno.db")


def _rows_naming(workspace: Path, text: str) -> dict[str, int]:
    """Per table, the rows with ``text`` anywhere in any column: what is left of a session."""
    db = _db(workspace)
    out: dict[str, int] = {}
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"):
        cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
        where = " OR ".join(f'instr(CAST("{c}" AS TEXT), ?) > 0' for c in cols)
        (n,) = db.execute(f'SELECT COUNT(*) FROM "{table}" WHERE {where}', (text,) * len(cols)).fetchone()
        if n:
            out[table] = n
    db.close()
    return out


async def _busy_session(root: Path, prompt: str) -> str:
    """A session with a bit of everything: an agent turn (requests, attempts, items), shell output
    in a job log, a withheld output saved as an artifact, Plan/Todo/notes state, a read receipt,
    a report and a memory entry."""
    script = [
        calls(
            call("shell", {"command": "echo logged; seq 1 40000"}),
            call("read", {"path": "a.txt"}),
            call("todo_update", {"action": "add", "items": [{"title": "x"}]}),
        ),
        calls(call("report_write", {"name": f"report-{prompt}", "content": "# kept\n"})),
        calls(call("memory_update", {"action": "set", "key": f"likes-{prompt}", "content": f"likes {prompt}"})),
        say("done"),
    ]
    async with zuno.Runtime(root=root, config_overrides=MEMORY) as rt:
        async with rt.agent(provider=ScriptedProvider(script)) as agent:
            result = await agent.run(prompt)
            assert result.stop_reason == "final", result
            outcomes = {r.name: str(r.outcome) for r in rt.store.calls(agent.id)}
            assert set(outcomes.values()) == {"ok"}, outcomes
            return agent.id


def test_prune_removes_every_row_and_file_of_old_sessions_and_keeps_the_rest(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    old = asyncio.run(_busy_session(workspace, "old"))
    time.sleep(0.05)
    new = asyncio.run(_busy_session(workspace, "new"))
    state = workspace / ".zuno"
    assert (state / "logs" / old).is_dir() and (state / "artifacts" / old).is_dir()
    left = _rows_naming(workspace, old)
    assert {"sessions", "calls", "events", "steps", "agent_items", "agent_requests", "work_state"} <= set(left)
    new_before = _rows_naming(workspace, new)
    reports_before = sorted(p.name for p in (state / "reports").iterdir())
    db = _db(workspace)
    (memory_before,) = db.execute("SELECT COUNT(*) FROM state_memory").fetchone()
    db.close()
    assert memory_before == 2 and len(reports_before) == 2

    async def prune() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            return rt.prune_sessions(keep=1)

    report = asyncio.run(prune())
    assert [p["id"] for p in report.pruned] == [old] and report.skipped == [] and report.kept == 1
    assert report.pruned[0]["rows"] > 20 and report.pruned[0]["bytes"] > 0
    # Nothing in any table names the old session any more, apart from the workspace's memory,
    # which is kept (its entries and their provenance are the workspace's).
    assert set(_rows_naming(workspace, old)) <= {"state_memory", "state_memory_proposals"}
    for name in SESSION_DIRS:
        assert not (state / name / old).exists()
    # The other session is untouched, the reports and the memory are all there.
    assert _rows_naming(workspace, new) == new_before
    assert (state / "logs" / new).is_dir()
    assert sorted(p.name for p in (state / "reports").iterdir()) == reports_before
    db = _db(workspace)
    assert db.execute("SELECT COUNT(*) FROM state_memory").fetchone()[0] == memory_before
    db.close()
    assert [s["id"] for s in zuno.Runtime(root=workspace).sessions()] == [new]


def test_the_cli_prunes_by_age_and_rank_and_a_dry_run_deletes_nothing(workspace: Path, run_zuno: RunZuno) -> None:
    ids = []
    for i in range(3):
        out = batch(run_zuno, [{"name": "shell", "arguments": {"command": f"echo {i}"}}])
        ids.append(out["session"])
        time.sleep(0.02)
    dry = run_zuno("sessions", "prune", "--keep", "1", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] and [p["id"] for p in plan["pruned"]] == [ids[1], ids[0]] and plan["kept"] == 1
    listed = json.loads(run_zuno("sessions", "--json").stdout)["sessions"]
    assert [s["id"] for s in listed] == ids[::-1]  # nothing went
    # By age: nothing is a day old.
    aged = run_zuno("sessions", "prune", "--older-than", "1d")
    assert aged.returncode == 0 and "pruned 0 session(s)" in aged.stdout and "3 kept" in aged.stdout
    done = run_zuno("sessions", "prune", "--keep", "1")
    assert done.returncode == 0, done.stderr
    assert f"pruned {ids[1]}" in done.stdout and f"pruned {ids[0]}" in done.stdout
    listed = json.loads(run_zuno("sessions", "--json").stdout)["sessions"]
    assert [s["id"] for s in listed] == [ids[2]]
    # A pruned session is gone for the commands that continue sessions, too.
    gone = run_zuno("call", "read", '{"path": "x"}', "--session", ids[0])
    assert gone.returncode == 2 and ids[0] in gone.stderr
    # Both criteria: a session must meet both to go (the last one is not 0 s... it is; keep 1 wins).
    both = run_zuno("sessions", "prune", "--older-than", "0s", "--keep", "1", "--json")
    assert json.loads(both.stdout)["pruned"] == []


def test_a_session_another_process_drives_is_kept_naming_it(workspace: Path, run_zuno: RunZuno) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-m", "zuno", "steps", "--new-session", "ses_heldopen"],
        cwd=workspace,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=zuno_env(),
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write(json.dumps([{"name": "shell", "arguments": {"command": "echo held"}}]) + "\n")
        holder.stdin.flush()
        assert json.loads(holder.stdout.readline())["session"] == "ses_heldopen"  # open, and held
        p = run_zuno("sessions", "prune", "--keep", "0")
        assert p.returncode == 1
        assert "kept ses_heldopen:" in p.stderr and f"pid {holder.pid}" in p.stderr
        assert "sessions" in _rows_naming(workspace, "ses_heldopen")
        assert (workspace / ".zuno" / "logs" / "ses_heldopen").is_dir()
    finally:
        holder.communicate(timeout=60)
    p = run_zuno("sessions", "prune", "--keep", "0")
    assert p.returncode == 0 and "pruned ses_heldopen" in p.stdout, p.stderr
    assert _rows_naming(workspace, "ses_heldopen") == {}


def test_a_session_open_in_this_process_is_kept(workspace: Path) -> None:
    async def go() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.session() as s:
                await s.step([{"name": "read", "arguments": {"path": "nothing.txt"}}])
                for dry_run in (True, False):
                    report = rt.prune_sessions(keep=0, dry_run=dry_run)
                    assert [k["id"] for k in report.skipped] == [s.id] and report.pruned == []
                return s.id

    sid = asyncio.run(go())
    assert "sessions" in _rows_naming(workspace, sid)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sessions", "prune"], "say which sessions go: --older-than AGE"),
        (["sessions", "--keep", "1"], "--keep go with 'zuno sessions prune'"),
        (["sessions", "prune", "--older-than", "soon"], "is not an age"),
        (["sessions", "prune", "--keep", "-2"], "is not a number of sessions"),
    ],
)
def test_a_bad_prune_is_a_usage_error_that_changes_nothing(
    workspace: Path, run_zuno: RunZuno, args: list[str], needle: str
) -> None:
    out = batch(run_zuno, [{"name": "read", "arguments": {"path": "x"}}])
    p = run_zuno(*args)
    assert p.returncode == 2 and needle in p.stderr, p.stderr
    assert "sessions" in _rows_naming(workspace, out["session"])


def test_no_store_prunes_nothing_and_creates_nothing(workspace: Path, run_zuno: RunZuno) -> None:
    p = run_zuno("sessions", "prune", "--keep", "0")
    assert p.returncode == 0 and "pruned 0 session(s)" in p.stdout
    assert not (workspace / ".zuno").exists()


def test_choose_needs_both_criteria() -> None:
    activity = [("c", 300.0), ("b", 200.0), ("a", 100.0)]
    assert choose(activity, older_than_s=None, keep=1, now=400) == [("b", 200.0), ("a", 100.0)]
    assert choose(activity, older_than_s=250, keep=None, now=400) == [("a", 100.0)]
    assert choose(activity, older_than_s=250, keep=2, now=400) == [("a", 100.0)]
    assert choose(activity, older_than_s=50, keep=0, now=400) == activity
    assert choose(activity, older_than_s=None, keep=5, now=400) == []


def test_a_session_active_again_after_it_was_chosen_is_kept(workspace: Path, run_zuno: RunZuno) -> None:
    sid = batch(run_zuno, [{"name": "read", "arguments": {"path": "x"}}])["session"]

    async def go() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            store = rt.store
            ((_, active),) = store.session_activity(str(rt.root))
            real = store.acquire_session

            def acquire(session_id: str) -> None:
                # Between being chosen and being held, another process uses the session.
                used = run_zuno("call", "read", '{"path": "y"}', "--session", session_id)
                assert used.returncode in (0, 1), used.stderr
                real(session_id)

            store.acquire_session = acquire  # type: ignore[method-assign]
            # Chosen: exactly an hour old by this clock; by the time it is held it is not.
            return prune_sessions(rt, older_than_s=3600, now=active + 3600 + 0.001)

    report = asyncio.run(go())
    assert report.pruned == [] and [k["reason"] for k in report.skipped] == ["it was active again since it was chosen"]
    assert "sessions" in _rows_naming(workspace, sid)

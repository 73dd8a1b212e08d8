"""At-most-once: an intent row is committed before a call starts; a process killed mid-call
leaves a call the next use of the session settles as uncertain — reported, never re-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import SRC, batch, zuno_env

EXT = str(Path(__file__).with_name("ext_tools.py"))


def _start_hanging_batch(workspace: Path, session: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "zuno", "batch", "-", "--new-session", session],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=workspace,
        env=zuno_env({"ZUNO_CONFIG_CONTENT": json.dumps({"extensions": [EXT]})}),
    )


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_kill_9_mid_call_then_the_next_step_reports_it_uncertain_and_nothing_reruns(workspace: Path, run_zuno) -> None:
    marker = workspace / "runs.txt"
    proc = _start_hanging_batch(workspace, "ses_crash")
    assert proc.stdin is not None
    proc.stdin.write(json.dumps([{"name": "touch_and_hang", "arguments": {"path": str(marker)}, "id": "hang-1"}]))
    proc.stdin.close()
    _wait_for(marker)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)

    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"extensions": [EXT]})}
    out = batch(run_zuno, [{"name": "read", "arguments": {"path": "."}}], "--session", "ses_crash", env=env)
    (notice,) = out["notices"]
    assert notice["kind"] == "uncertain_call"
    assert notice["call_id"] == "hang-1" and notice["tool"] == "touch_and_hang" and notice["attempt"] == 1
    assert "hang-1" in notice["text"] and "touch_and_hang" in notice["text"] and "attempt 1" in notice["text"]
    assert "not re-run" in notice["text"]
    # Nothing ran again: the marker still holds exactly one run.
    assert marker.read_text().count("run ") == 1
    # The durable record says uncertain, and the recovery is an event.
    ev = json.loads(run_zuno("events", "--session", "ses_crash", "--json").stdout)["events"]
    kinds = [e["kind"] for e in ev]
    assert "call-started" in kinds and "call-recovered" in kinds
    # The notice is delivered exactly once.
    again = batch(run_zuno, [], "--session", "ses_crash", env=env)
    assert again["notices"] == []


def test_a_session_is_driven_by_one_process_at_a_time(workspace: Path, run_zuno) -> None:
    marker = workspace / "runs.txt"
    proc = _start_hanging_batch(workspace, "ses_busy")
    assert proc.stdin is not None
    proc.stdin.write(json.dumps([{"name": "touch_and_hang", "arguments": {"path": str(marker)}}]))
    proc.stdin.close()
    try:
        _wait_for(marker)
        other = run_zuno("batch", "-", "--session", "ses_busy", input="[]")
        assert other.returncode == 2
        assert "driven by another process" in other.stderr and str(proc.pid) in other.stderr
        # The running call was not settled by the other process.
        assert "call-recovered" not in run_zuno("events", "--session", "ses_busy").stdout
    finally:
        proc.kill()
        proc.wait(30)


def test_two_processes_in_one_workspace_lose_no_record(workspace: Path) -> None:
    calls = json.dumps([{"name": "read", "arguments": {"path": "."}} for _ in range(20)])
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "zuno", "batch", "-", "--new-session", f"ses_par{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=workspace,
            env=zuno_env(),
        )
        for i in range(4)
    ]
    for p in procs:
        p.communicate(calls, timeout=120)
        assert p.returncode == 0
    import sqlite3

    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    counts = dict(db.execute("SELECT session_id, COUNT(*) FROM calls GROUP BY session_id").fetchall())
    assert counts == {f"ses_par{i}": 20 for i in range(4)}
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert SRC.is_dir()


async def test_notices_of_a_step_that_died_are_delivered_again(workspace: Path) -> None:
    import zuno

    async with zuno.Runtime(root=workspace) as rt:
        s = rt.session("ses_n")
        await s.open()
        rt.store.add_notice(s.id, "test", "hello")
        n = rt.store.begin_step(s.id)
        assert [x["text"] for x in rt.store.take_notices(s.id, n)] == ["hello"]
        # the step dies here, before it ends: the notice was not consumed
        n2 = rt.store.begin_step(s.id)
        assert n2 == n + 1
        res = await s.step([])
        assert [x["text"] for x in res.notices] == ["hello"]
        again = await s.step([])
        assert again.notices == []
        await s.close()

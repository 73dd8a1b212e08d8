"""Sessions across invocations: the id is printed, -c continues the most recent, zuno sessions lists
them, a missing --session is an error, an invalid id writes nothing; commands that only look create
nothing; session lock files do not accumulate, and removing them keeps the lock exclusive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from zuno import Runtime
from zuno.session_ids import InvalidSessionId, SessionNotFound
from zuno.store import Store

from conftest import SRC, zuno_env


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_read_then_write_continues_the_session(workspace: Path, run_zuno: Any) -> None:
    (workspace / "x.txt").write_text("old\n")
    first = run_zuno("call", "read", '{"path": "x.txt"}')
    assert first.returncode == 0, first.stderr
    sid = first.stderr.split("zuno: session ", 1)[1].split()[0]
    assert sid.startswith("ses_") and f"--session {sid}" in first.stderr and first.stdout == "1\told\n"
    second = run_zuno("call", "-c", "write", '{"path": "x.txt", "content": "new\\n"}')
    assert second.returncode == 0, second.stdout + second.stderr  # no ReadRequired: the read carried over
    assert f"zuno: session {sid}" in second.stderr and (workspace / "x.txt").read_text() == "new\n"
    # batch, steps and events continue it too
    out = json.loads(run_zuno("batch", "-", "-c", input='[{"name": "read", "arguments": {"path": "x.txt"}}]').stdout)
    assert out["session"] == sid and out["step"] == 3
    line = run_zuno("steps", "-", "--continue", input='[{"name": "read", "arguments": {"path": "x.txt"}}]\n').stdout
    assert json.loads(line)["session"] == sid
    events = json.loads(run_zuno("events", "-c", "--json").stdout)
    assert events["session"] == sid and [e["kind"] for e in events["events"]].count("call-started") == 4

    listed = json.loads(run_zuno("sessions", "--json").stdout)["sessions"]
    (row,) = listed
    assert row["id"] == sid and row["calls"] == 4 and row["last_step"] == 4 and row["open_jobs"] == 0
    assert row["started_at"] <= row["last_step_at"]
    text = run_zuno("sessions").stdout
    assert sid in text and "OPEN JOBS" in text

    # a new session is the most recent one now
    run_zuno("call", "read", '{"path": "x.txt"}')
    newest = json.loads(run_zuno("sessions", "--json").stdout)["sessions"]
    assert len(newest) == 2 and newest[1]["id"] == sid
    assert (
        json.loads(run_zuno("call", "-c", "read", '{"path": "x.txt"}', "--json").stdout)["session"] == newest[0]["id"]
    )


def test_a_missing_session_is_an_error_never_a_new_one(workspace: Path, run_zuno: Any) -> None:
    run_zuno("call", "read", '{"path": "."}')
    for argv in (("call", "read", '{"path": "."}'), ("batch", "-"), ("steps", "-"), ("events",)):
        proc = run_zuno(*argv, "--session", "ses_doesnotexist", input="[]")
        assert proc.returncode == 2 and "no session 'ses_doesnotexist'" in proc.stderr, argv
        assert "zuno sessions" in proc.stderr
        # only a command that starts a session when it names none offers that as the way out
        starts = argv[0] != "events"
        assert ("leave out --session to start a new one" in proc.stderr) == starts, (argv, proc.stderr)
    for argv in (("show", "ses_doesnotexist"), ("resume", "ses_doesnotexist", "go on")):
        proc = run_zuno(*argv)
        assert proc.returncode == 2 and "no session 'ses_doesnotexist'" in proc.stderr, (argv, proc.stderr)
        assert "zuno sessions" in proc.stderr and "--session" not in proc.stderr, (argv, proc.stderr)
    assert len(json.loads(run_zuno("sessions", "--json").stdout)["sessions"]) == 1
    made = run_zuno("call", "read", '{"path": "."}', "--new-session", "mine-1", "--json")
    assert json.loads(made.stdout)["session"] == "mine-1"
    again = run_zuno("call", "read", '{"path": "."}', "--new-session", "mine-1")
    assert again.returncode == 2 and "already exists" in again.stderr and "--session mine-1" in again.stderr
    assert run_zuno("call", "read", '{"path": "."}', "--session", "mine-1").returncode == 0


@pytest.mark.parametrize("bad", ["../../../esc", "a/b", "..", "x\\y", "a b", "-x", ".hidden", "é", "a" * 65, ""])
def test_an_invalid_session_id_writes_nothing_anywhere(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "deep" / "er" / "ws"
    root.mkdir(parents=True)
    before = _files(tmp_path)
    for argv in (
        ["call", "shell", '{"command": "echo hi"}', f"--session={bad}"],
        ["call", "shell", '{"command": "echo hi"}', f"--new-session={bad}"],
        ["batch", "-", f"--session={bad}"],
        ["steps", "-", f"--session={bad}"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "zuno", *argv],
            cwd=root,
            env=zuno_env(),
            input="[]",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "is not valid" in proc.stderr and "Traceback" not in proc.stderr
    assert _files(tmp_path) == before  # no log dir, no lock file, no database, in or outside the workspace


def test_the_python_api_refuses_an_invalid_id_before_writing(workspace: Path) -> None:
    rt = Runtime(root=workspace)
    for bad in ("../esc", "a/b", 7):
        with pytest.raises(InvalidSessionId):
            rt.session(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidSessionId):
            rt.resolve_session(bad)  # type: ignore[arg-type]
    with pytest.raises(SessionNotFound, match="zuno sessions"):
        rt.resolve_session("ses_none")
    with pytest.raises(SessionNotFound):
        rt.resolve_session(None, continue_latest=True)
    assert not (workspace / ".zuno").exists()


def test_commands_that_only_look_create_nothing(workspace: Path, run_zuno: Any) -> None:
    for argv in (
        ("tools",),
        ("tools", "--json"),
        ("sessions",),
        ("sessions", "--json"),
        ("version",),
        ("version", "--json"),
        ("events", "-c"),
        ("receipt", "rcp_00000000"),
        ("memory",),
        ("memory", "--json"),
    ):
        run_zuno(*argv)
        assert not (workspace / ".zuno").exists(), argv
    # With a store: looking does not change it.
    run_zuno("call", "read", '{"path": "."}')
    db = workspace / ".zuno" / "zuno.db"
    before = (db.stat().st_size, db.stat().st_mtime_ns)
    for argv in (("sessions", "--json"), ("events", "-c", "--json"), ("receipt", "rcp_00000000"), ("memory",)):
        run_zuno(*argv)
    assert (db.stat().st_size, db.stat().st_mtime_ns) == before
    version = json.loads(run_zuno("version", "--json").stdout)
    assert version["zuno"] and version["sqlite"].count(".") >= 2
    assert version["ripgrep"]["found"] is True and int(version["ripgrep"]["version"].split(".")[0]) >= 14
    assert run_zuno("--version").stdout.startswith("zuno ")


def test_session_lock_files_do_not_accumulate(workspace: Path, run_zuno: Any) -> None:
    for _ in range(3):
        assert run_zuno("call", "read", '{"path": "."}').returncode == 0
    locks = workspace / ".zuno" / "locks"
    assert not [p.name for p in locks.iterdir() if p.name.startswith("session-")]


_CONTENDER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from zuno.store import SessionBusy, Store
    db, sid, log, rounds = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = Store(db)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    held = 0
    while held < rounds:
        try:
            store.acquire_session(sid)
        except SessionBusy:
            continue
        os.write(fd, b"+%d\\n" % os.getpid())
        time.sleep(0.0005)
        os.write(fd, b"-%d\\n" % os.getpid())
        store.release_session(sid)
        held += 1
    store.close()
    """
)


def test_removing_lock_files_keeps_a_session_exclusive_across_processes(tmp_path: Path) -> None:
    db = tmp_path / "z.db"
    Store(db).close()
    log = tmp_path / "log"
    log.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _CONTENDER, str(db), "ses_race", str(log), "150"], env=env)
        for _ in range(4)
    ]
    for p in procs:
        assert p.wait(180) == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 4 * 150 * 2
    holder = None
    for line in lines:  # strictly alternating enter/leave by one holder at a time
        if line.startswith("+"):
            assert holder is None, "two processes held the session at once"
            holder = line[1:]
        else:
            assert holder == line[1:]
            holder = None
    assert not list((tmp_path / "locks").iterdir())


def test_show_of_a_session_no_model_drove_says_where_its_calls_are(workspace: Path, run_zuno: Any) -> None:
    run_zuno("call", "read", '{"path": "."}', "--new-session", "cli-only")
    run_zuno("call", "read", '{"path": "."}', "--session", "cli-only")
    shown = run_zuno("show", "cli-only")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("session cli-only · mode work")
    assert lines[1] == (
        "(no agent conversation in this session: its 2 tool calls came from zuno call, batch, steps or MCP; "
        "see them with `zuno events --session cli-only`)"
    )
    assert json.loads(run_zuno("show", "--json", "cli-only").stdout)["items"] == []


def test_show_dash_c_shows_the_most_recent_session(workspace: Path) -> None:
    import subprocess
    import sys

    from conftest import zuno_env

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "zuno", *args, "--root", str(workspace)],
            capture_output=True, text=True, env=zuno_env({}), timeout=60, check=False,
        )

    (workspace / "a.txt").write_text("a\n")
    assert cli("call", "read", '{"path": "a.txt"}', "--new-session", "older").returncode == 0
    assert cli("call", "read", '{"path": "a.txt"}', "--new-session", "newer").returncode == 0
    p = cli("show", "-c")
    assert p.returncode == 0 and "session newer" in p.stdout, p.stdout + p.stderr

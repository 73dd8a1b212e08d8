"""Store waits, continued (sixteenth round).

1. A Ctrl-C in the first slice of a store wait (its first 25 ms) was taken by the event loop's
   handler before the wait's own was installed, so that wait ran to its end: now it ends the wait.
   The first slice is made long here (``SLICE_MS`` in the child), so the signal lands in it for
   certain; the child says when it opens the store, and one SIGINT is sent then.
2. ``zuno plan`` / ``todo`` / ``goal`` read with a connection of their own, Python's 5 s timeout and
   SQLite's bare "database is locked": now the store's read-only connection, its wait and words.
3. ``/goal resume`` in interactive ``zuno run`` could not name the request (``--request GI_ID``).

All real: the CLI in a process of its own, a second process holding the lock, a real SIGINT. Times
are compared with the configured wait only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import zuno
from test_run_terminal import Pty
from test_state_outside import configure
from test_store_locked_midcall import Holder
from zuno.cli_session import StopSignals
from zuno.commands.goal_resume import parse_goal_line, resume_from_line
from zuno.store import connection
from zuno.store.connection import StoreWaitInterrupted

from conftest import zuno_env
from fake_provider import FakeProvider
from statehelp import call

WAIT_MS = 6000  # the whole busy wait of the command under test
FIRST_SLICE_MS = 600  # its slices, long: a signal sent once the store opens lands in the first

# The CLI with its waits set; it says on stderr when it opens the store (the first statement, and
# its first slice, follow at once).
CLI = (
    "import sqlite3, sys; import zuno.store.connection as c; c.BUSY_TIMEOUT_MS = {ms}; c.SLICE_MS = {slice}\n"
    "_connect = sqlite3.connect\n"
    "def opening(*a, **k):\n"
    "    print('test: opening the store', file=sys.stderr, flush=True)\n"
    "    return _connect(*a, **k)\n"
    "sqlite3.connect = opening\n"
    "from zuno.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.fixture
def holder(workspace: Path, tmp_path: Path) -> Iterator[Holder]:
    h = Holder(tmp_path, workspace / ".zuno" / "zuno.db")
    yield h
    h.stop()


def _start(workspace: Path, *args: str, ms: int = WAIT_MS, slice_ms: int = FIRST_SLICE_MS) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI.format(ms=ms, slice=slice_ms), *args, "--root", str(workspace)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=zuno_env({"NO_COLOR": "1"}),
    )


def _first_session(workspace: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zuno", "call", "read", '{"path": "."}', "--root", str(workspace)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=zuno_env(), timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _interrupt_at_open(child: subprocess.Popen[str], into: float = 0.0) -> tuple[str, float]:
    """One SIGINT as soon as the child opens the store (or ``into`` seconds later: into its wait);
    its stderr, and how long it took to exit after the signal."""
    assert child.stderr is not None
    seen = []
    while "test: opening the store" not in (line := child.stderr.readline()):
        assert line, f"the child ended before opening the store: {''.join(seen)}"
        seen.append(line)
    time.sleep(into)  # (into the wait: not a timing assertion)
    err, after = interrupt(child)
    return "".join(seen) + err, after


def interrupt(child: subprocess.Popen[str]) -> tuple[str, float]:
    """One SIGINT to ``child`` now; its stderr, and how long it took to exit after the signal."""
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return err, time.monotonic() - sent


def test_ctrl_c_in_the_first_slice_of_the_wait_at_open_ends_it(workspace: Path, holder: Holder) -> None:
    _first_session(workspace)
    holder.take()
    child = _start(workspace, "call", "read", '{"path": "."}', "-c")
    err, after = _interrupt_at_open(child)
    assert after < WAIT_MS / 1000 / 2, f"exited {after:.2f} s after Ctrl-C, with a busy wait of {WAIT_MS} ms"
    assert child.returncode == 130, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "Zuno stopped waiting for it after" in err and "(interrupted)" in err, err
    assert "stayed locked for the whole" not in err, err



async def test_a_sigint_in_the_first_slice_of_a_wait_in_a_running_session_ends_it(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handlers ``zuno call`` / ``batch`` / ``steps`` install while a session runs (the loop's
    own, whose callback cancels the step): a SIGINT that comes in the first slice ends the wait."""
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", WAIT_MS)
    monkeypatch.setattr(connection, "SLICE_MS", FIRST_SLICE_MS)
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        holder = Holder(tmp_path, rt.db_path)
        try:
            holder.take()
            stop = StopSignals(s)
            with stop.installed(asyncio.get_running_loop()):
                # (into the first slice, well before it ends: not a timing assertion)
                threading.Timer(FIRST_SLICE_MS / 1000 / 5, os.kill, (os.getpid(), signal.SIGINT)).start()
                began = time.monotonic()
                with pytest.raises(StoreWaitInterrupted) as caught:
                    rt.store.add_event(s.id, "noted", {})
                took = time.monotonic() - began
                await asyncio.sleep(0.05)  # the loop runs: the step is cancelled, as before
            assert took < WAIT_MS / 1000 / 2, f"{took:.2f} s, with a busy wait of {WAIT_MS} ms"
            assert caught.value.signum == signal.SIGINT and "(interrupted)" in str(caught.value)
            assert stop.status == 130
            assert connection.deferred() is None  # the loop ran: a later wait is not cut short
        finally:
            holder.stop()

# -- 2. zuno plan / todo / goal read through the store's read-only connection ----------------------

SHORT_MS = 800  # the busy wait of a read left to run out

# Another program that holds the store in exclusive locking mode: in WAL mode the one lock that
# keeps readers out (a plain BEGIN EXCLUSIVE does not: it is BEGIN IMMEDIATE there).
EXCLUSIVE_HOLDER = (
    "import sqlite3, sys, time\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
    "c.execute('BEGIN EXCLUSIVE')\n"
    "c.execute('SELECT COUNT(*) FROM sessions').fetchone()\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes its end
)


@pytest.fixture
def exclusive_holder(workspace: Path) -> Iterator[subprocess.Popen[str]]:
    _first_session(workspace)
    proc = subprocess.Popen(
        [sys.executable, "-c", EXCLUSIVE_HOLDER, str(workspace / ".zuno" / "zuno.db")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    yield proc
    proc.kill()
    proc.wait()


def test_zuno_plan_reads_while_another_process_holds_begin_exclusive(workspace: Path, holder: Holder) -> None:
    """WAL mode: a read never waits for another program's transaction, BEGIN EXCLUSIVE included."""
    _first_session(workspace)
    holder.take()
    for kind in ("plan",):
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", CLI.format(ms=WAIT_MS, slice=25), kind, "--root", str(workspace)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, env=zuno_env(), timeout=60,
        )
        took = time.monotonic() - began
        assert done.returncode == 0, done.stderr
        assert f"no {kind} yet" in done.stdout, done.stdout
        assert took < WAIT_MS / 1000 / 2, f"{took:.2f} s for a read, with a busy wait of {WAIT_MS} ms"


def test_zuno_plan_on_a_store_held_exclusively_waits_the_stores_wait_says_so_and_hears_ctrl_c(
    workspace: Path, exclusive_holder: subprocess.Popen[str]
) -> None:
    began = time.monotonic()
    child = _start(workspace, "plan", ms=SHORT_MS, slice_ms=25)
    _out, err = child.communicate(timeout=60)
    took = time.monotonic() - began
    db = workspace / ".zuno" / "zuno.db"
    assert child.returncode == 2, err
    assert f"store {db} is locked by another process: it stayed locked for the whole {SHORT_MS / 1000:g} s" in err
    assert "Traceback" not in err and "internal error" not in err, err
    assert took >= SHORT_MS / 1000, f"{took:.2f} s for a busy wait of {SHORT_MS} ms"
    # Ctrl-C during that wait ends it (Python's own 5 s wait, before, heard it only at its end)
    child = _start(workspace, "goal", slice_ms=25)
    err, after = _interrupt_at_open(child, into=0.3)
    assert after < WAIT_MS / 1000 / 2, f"exited {after:.2f} s after Ctrl-C, with a busy wait of {WAIT_MS} ms"
    assert child.returncode == 130, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "zuno: interrupted" in err, err


# -- 3. /goal resume --request GI_ID ANSWER in interactive zuno run --------------------------------


async def _asked(workspace: Path) -> tuple[str, str]:
    """A session whose Goal asked for required input: (session id, request id)."""
    create = {"action": "create", "objective": "ship the service", "criteria": [{"text": "deployed"}]}
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await call(s, "goal_update", create)).outcome == "ok"
        rec = await call(s, "goal_request_input", {"expected_revision": 1, "question": "Which database?"})
        assert rec.outcome == "ok", rec.text
        return s.id, str(rec.metadata["waitingInput"])


def _goal_and_requests(workspace: Path, sid: str) -> tuple[dict[str, object], list[tuple[str, str | None]]]:
    rt = zuno.Runtime(root=workspace)
    try:
        goal = rt.state(sid)["goal"]
    finally:
        rt.store.close()
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    try:
        rows = [(str(r[0]), r[1]) for r in db.execute("SELECT status, answer FROM goal_input_requests")]
    finally:
        db.close()
    return goal, rows


async def test_goal_resume_line_names_the_request_and_is_refused_as_the_command_is(workspace: Path) -> None:
    sid, rid = await _asked(workspace)
    assert parse_goal_line(f"/goal resume --request {rid} postgres 16") == ("postgres 16", rid)
    assert parse_goal_line(f"/goal resume --request={rid}   postgres") == ("postgres", rid)
    assert parse_goal_line("/goal resume postgres 16") == ("postgres 16", None)
    assert parse_goal_line("/goal resume") == (None, None)
    rt = zuno.Runtime(root=workspace)
    try:
        said = resume_from_line(rt.store, sid, f"/goal resume --request {rid}")  # no answer
        assert f"--request {rid} names the request to answer" in said and "/goal resume --request" in said, said
        said = resume_from_line(rt.store, sid, "/goal resume --request")
        assert "needs the request's id" in said, said
        said = resume_from_line(rt.store, sid, "/goal resume --request gi_other postgres")
        assert "no required-input request gi_other" in said, said
        said = resume_from_line(rt.store, sid, "/goal resume")
        assert "waiting for your input" in said, said
        said = resume_from_line(rt.store, sid, "/goal stop")
        assert said.startswith("/goal resume [--request GI_ID] [your answer]"), said
    finally:
        rt.store.close()
    goal, rows = _goal_and_requests(workspace, sid)
    assert goal["revision"] == 2 and rows == [("pending", None)]  # nothing of those changed anything
    rt = zuno.Runtime(root=workspace)
    try:
        said = resume_from_line(rt.store, sid, f"/goal resume --request {rid} postgres 16")
        assert f"Goal resumed with your answer to {rid}" in said, said
        said = resume_from_line(rt.store, sid, f"/goal resume --request {rid} sqlite")  # answered once
        assert f"request {rid} was already answered ('postgres 16')" in said, said
    finally:
        rt.store.close()
    goal, rows = _goal_and_requests(workspace, sid)
    assert goal["revision"] == 3 and rows == [("answered", "postgres 16")]


async def test_slash_goal_resume_with_the_request_in_the_interactive_session(workspace: Path) -> None:
    sid, rid = await _asked(workspace)
    with FakeProvider() as fake:
        configure(workspace, fake)
        term = Pty(workspace, "--continue")
        term.until(b"zuno> ")
        term.write(f"/goal resume --request {rid} postgres 16\r".encode())
        term.until(b"Goal resumed with your answer to " + rid.encode())
        term.write(b"/exit\r")
        assert term.finish() == 0
        assert fake.requests == []  # nothing was sent to the model
    goal, rows = _goal_and_requests(workspace, sid)
    assert goal["revision"] == 3 and rows == [("answered", "postgres 16")]

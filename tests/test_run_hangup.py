"""`zuno run` when its terminal hangs up (the window closed: SIGHUP, and the terminal gone, so
writing to it fails): the step is cancelled and settles as for SIGTERM, the session closes, nothing
it started survives, and the exit status is 129. Before, SIGHUP's default action killed it where it
stood: the call was left unsettled for the next start to recover."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_run_terminal import Pty, configure

from fake_provider import Call, FakeProvider, Reply

SLEEP = "sleep 59.44"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _alive(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [p for p in out.split() if int(p) != os.getpid()]


def _hang_up(term: Pty) -> int:
    """What closing the terminal's window does: the terminal is gone, and the session gets SIGHUP."""
    os.close(term.master)
    os.kill(term.child.pid, signal.SIGHUP)
    try:
        return term.child.wait(60)
    finally:
        if term.child.poll() is None:
            term.child.kill()


def test_a_hangup_mid_step_cancels_and_settles_the_step_and_exits_129(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake)
    fake.script(Reply(calls=[Call("shell", f'{{"command": "{SLEEP}; echo never"}}')]), Reply(text="unused"))
    term = Pty(workspace)
    term.until(b"zuno> ")
    term.write(b"go\r")
    deadline = time.monotonic() + 30
    while not _alive(SLEEP) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(SLEEP), term.text
    assert _hang_up(term) == 129
    deadline = time.monotonic() + 10
    while _alive(SLEEP) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(SLEEP) == []
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    rows = db.execute("SELECT name, outcome, cancelled, ended_at IS NOT NULL FROM calls").fetchall()
    assert rows == [("shell", "uncertain", 1, 1)], rows  # settled now, not left for the next start


def test_a_hangup_at_the_prompt_ends_the_session_with_129(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake)
    term = Pty(workspace)
    term.until(b"zuno> ")
    assert _hang_up(term) == 129


def test_a_terminal_gone_before_its_sighup_is_handled_is_a_hangup_too(workspace: Path, fake: FakeProvider) -> None:
    """The answer streams on; the terminal is closed, and the next write fails (EIO) before the
    SIGHUP is handled: a hang-up as well (129, the turn interrupted and recorded), not an
    "internal error"."""
    configure(workspace, fake)
    fake.script(Reply(text=[f"line {i}\n" for i in range(400)], delay_s=0.01))
    term = Pty(workspace)
    term.until(b"zuno> ")
    term.write(b"go\r")
    term.until(b"line 3")
    os.close(term.master)  # no SIGHUP sent: only the terminal is gone
    try:
        assert term.child.wait(60) == 129
    finally:
        if term.child.poll() is None:
            term.child.kill()
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    assert db.execute("SELECT status FROM agent_requests").fetchall() == [("interrupted",)]

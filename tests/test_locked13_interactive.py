"""Interactive ``zuno run`` meeting a store locked by another process (outside testing, thirteenth
round).

Before, a turn of the interactive session that met the lock ended the whole session: the message,
then the exit, although the user could have let the lock go and gone on. Now the lock ends only the
turn: the store's words (the file, what became of the call), what became of the turn and what the
next prompt does, then the prompt again. The next prompt, once the lock is gone, first does what
the next open of the session would (the call left unsettled settles as uncertain, never run again;
the open turn ends as interrupted, saying why: ``Agent._after_lock``), then runs.

All real: the CLI in a process of its own on a pseudo-terminal (stdin, stdout and stderr), its busy
wait shortened; the loopback fake model provider; a second process holding ``BEGIN EXCLUSIVE``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_run_store_locked import _config, _turns
from test_store_locked_midcall import CLI, SHORT_MS, Holder
from zuno.agent.api import LOCKED_TURN_TEXT

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply


class Terminal:
    """zuno run (interactive: no prompt) with stdin, stdout and stderr on one pseudo-terminal."""

    def __init__(self, root: Path, config_dir: Path) -> None:
        self.master, slave = pty.openpty()
        self.child = subprocess.Popen(
            [sys.executable, "-c", CLI.format(ms=SHORT_MS), "run", "--root", str(root)],
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            env=zuno_env({"NO_COLOR": "1", "ZUNO_CONFIG_DIR": str(config_dir)}),
        )
        os.close(slave)
        self.seen = b""

    def until(self, marker: bytes, start: int = 0, within: float = 60) -> int:
        """Read until ``marker`` appears at or after offset ``start``; the offset just past it."""
        deadline = time.monotonic() + within
        while self.seen.find(marker, start) < 0 and time.monotonic() < deadline:
            if select.select([self.master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.seen += chunk
        at = self.seen.find(marker, start)
        assert at >= 0, self.text
        return at + len(marker)

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, within: float = 30) -> int:
        try:
            return self.child.wait(within)
        finally:
            if self.child.poll() is None:
                self.child.kill()
                self.child.wait()
            os.close(self.master)

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace").replace("\r\n", "\n")


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


@pytest.fixture
def holder(workspace: Path, tmp_path: Path) -> Iterator[Holder]:
    h = Holder(tmp_path, workspace / ".zuno" / "zuno.db")
    yield h
    h.stop()


def test_a_lock_ends_the_turn_not_the_session_and_the_next_prompt_goes_on(
    workspace: Path, tmp_path: Path, fake: FakeProvider, holder: Holder
) -> None:
    _config(workspace, fake)
    effect = tmp_path / "effect"
    command = (f"touch '{holder.go}'; while [ ! -e '{holder.held}' ]; do sleep 0.01; done; "
               f"echo ran >> '{effect}'; echo done")
    fake.script(Reply(calls=[Call("shell", json.dumps({"command": command}))]))
    term = Terminal(workspace, tmp_path / "cfg")
    try:
        at = term.until(b"zuno> ")
        term.write(b"run it\n")
        at = term.until(b"zuno: store ", at)
        at = term.until(b"zuno> ", at)  # the prompt again: the session goes on
        said = term.text
        assert term.child.poll() is None, said
        assert "internal error" not in said and "Traceback" not in said, said
        db = workspace / ".zuno" / "zuno.db"
        assert f"store {db} is locked by another process" in said, said
        assert "Call call_1 (shell) ran, but its result could not be recorded" in said, said
        assert "stopped there, its end not recorded. Type the next prompt once the store is free" in said, said
        assert effect.read_text() == "ran\n"
        assert len(fake.requests) == 1  # nothing asked of the model after the lock
        # A prompt while the store is still locked: it waits the whole busy wait again (a new run),
        # then says that nothing of it ran; the session still goes on.
        asked, mark = time.monotonic(), len(term.seen)
        term.write(b"again\n")
        at = term.until(b"zuno: store ", at)
        assert time.monotonic() - asked >= SHORT_MS / 1000  # not the no-wait try that follows a lock
        at = term.until(b"zuno> ", at)
        assert b"Nothing of this prompt was run" in term.seen[mark:], term.text
        assert len(fake.requests) == 1
        holder.release()
        fake.script(Reply(text="went on after the lock"))
        term.write(b"go on\n")
        at = term.until(b"went on after the lock", at)
        at = term.until(b"zuno> ", at)
        term.write(b"/exit\n")
        assert term.finish() == 0, term.text
    finally:
        if term.child.poll() is None:
            term.child.kill()
            term.child.wait()
    assert effect.read_text() == "ran\n"  # never run again
    # The call the lock left unsettled reached the model as uncertain, not as "never ran".
    (result,) = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("[uncertain"), result["content"]
    turns = _turns(workspace)
    assert [(t["stop_reason"], t["stop_detail"]) for t in turns] == [
        ("interrupted", LOCKED_TURN_TEXT), ("final", turns[1]["stop_detail"])
    ]


def test_a_prompt_or_mode_given_while_the_store_is_locked_runs_nothing_and_the_prompt_comes_back(
    workspace: Path, tmp_path: Path, fake: FakeProvider, holder: Holder
) -> None:
    _config(workspace, fake)
    fake.script(Reply(text="before the lock"))
    term = Terminal(workspace, tmp_path / "cfg")
    try:
        at = term.until(b"zuno> ")
        term.write(b"first\n")
        at = term.until(b"before the lock", at)
        at = term.until(b"zuno> ", at)
        holder.take()
        term.write(b"/mode plan\n")  # a command that writes meets the lock too: the session goes on
        at = term.until(b"The mode was not changed: give /mode again once the store is free.", at)
        at = term.until(b"zuno> ", at)
        term.write(b"second\n")
        at = term.until(b"zuno: store ", at)
        at = term.until(b"zuno> ", at)
        said = term.text
        assert "Nothing of this prompt was run (no request went to the model, no call started)" in said, said
        assert len(fake.requests) == 1
        holder.release()
        fake.script(Reply(text="after the lock"))
        term.write(b"third\n")
        at = term.until(b"after the lock", at)
        at = term.until(b"zuno> ", at)
        term.write(b"/exit\n")
        assert term.finish() == 0, term.text
    finally:
        if term.child.poll() is None:
            term.child.kill()
            term.child.wait()
    users = [m["content"] for m in fake.requests[-1].body["messages"] if m["role"] == "user"]
    assert "first" in users[0] and "third" in users[-1], users
    assert [t["stop_reason"] for t in _turns(workspace)][-1] == "final"
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    try:
        assert db.execute("SELECT mode FROM agent_state").fetchall() == [("work",)]  # /mode changed nothing
    finally:
        db.close()

"""Zuno's store locked by another process in the middle of a call (outside testing, eleventh round).

Before: the call failed with SQLite's bare "database is locked" (``sqlite3.OperationalError``), and
``zuno call`` said the store "cannot be used (database is locked)". Now the statement on Zuno's own
store connection that meets the lock is ``StoreLocked``: the file, that another process holds it,
what became of the call (not started; or ran, its record unsettled, settled as uncertain by the
next open and never run again), and what to do, in the words ``zuno`` uses at open time. A tool's
OWN SQLite database being locked is never taken for the store: that is the tool's error.

The lock is real: a second process holds ``BEGIN EXCLUSIVE`` on the file. The busy wait is
shortened through ``zuno.store.connection.BUSY_TIMEOUT_MS`` (read at each open).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import zuno
from zuno.store import StoreLocked, connection
from zuno.store.paths import StoreUnusable

from conftest import zuno_env

SHORT_MS = 400

HOLDER = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    db, go, held, release = sys.argv[1:5]
    deadline = time.monotonic() + 60  # never outlives a broken test by long
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("BEGIN EXCLUSIVE")  # another program's transaction, left open
    open(held, "w").close()
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.01)
    c.execute("ROLLBACK")
    c.close()
    """
)


class Holder:
    """A second process that takes an exclusive lock on ``db`` once ``go`` exists, creates ``held``,
    and lets go once ``release`` exists."""

    def __init__(self, tmp: Path, db: Path) -> None:
        self.go, self.held, self.release_file = tmp / "go", tmp / "held", tmp / "release"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db), str(self.go), str(self.held), str(self.release_file)]
        )

    def take(self) -> None:
        """Lock now, from the test (not from inside a call), and wait until it is held."""
        self.go.touch()
        while not self.held.exists():
            assert self.proc.poll() is None, "the holder died"
            time.sleep(0.01)  # polling for the lock, not a timing assertion

    def release(self) -> None:
        self.go.touch()  # (a holder that never locked ends too)
        self.release_file.touch()
        assert self.proc.wait(30) == 0

    def stop(self) -> None:
        """At a test's end: a holder still running lets go (or is killed)."""
        if self.proc.poll() is None:
            self.release_file.touch()
            self.go.touch()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", SHORT_MS)


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.stop()


def _waiting_command(holder: Holder, effect: Path) -> str:
    """A shell command that, while it runs, has the holder lock the store, then records its effect."""
    return (
        f"touch '{holder.go}'; while [ ! -e '{holder.held}' ]; do sleep 0.01; done; "
        f"echo ran >> '{effect}'; echo done"
    )


async def _db_path(workspace: Path) -> tuple[str, Path]:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await s.step([{"name": "read", "arguments": {"path": "."}}])).results[0].outcome == "ok"
        return s.id, rt.db_path


async def test_a_never_call_whose_result_meets_the_lock_is_named_and_settled_uncertain_not_rerun(
    workspace: Path, tmp_path: Path, short_wait: None, holders: list[Holder]
) -> None:
    sid, db = await _db_path(workspace)
    effect = tmp_path / "effect"
    holder = Holder(tmp_path, db)
    holders.append(holder)
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        call = {"name": "shell", "arguments": {"command": _waiting_command(holder, effect)}}
        with pytest.raises(StoreLocked) as caught:
            await s.step([call])
        message = str(caught.value)
        assert message.startswith(f"store {db} is locked by another process: it stayed locked for the whole 0.4 s")
        assert "(shell) ran, but its result could not be recorded" in message, message
        assert "settles it as uncertain and never runs it again" in message, message
        assert "Let that program finish" in message
        assert "database is locked" not in message
        assert caught.value.ran is True
        assert isinstance(caught.value, sqlite3.OperationalError)  # still an SQLite error to a caller
        assert effect.read_text() == "ran\n"
        # In this process the intent row is still there, unsettled: the call is not forgotten.
        (row,) = [r for r in rt.store.unsettled_calls(sid) if r.name == "shell"]
        holder.release()
        # The same session goes on once the lock is gone.
        assert (await s.step([{"name": "read", "arguments": {"path": "."}}])).results[0].outcome == "ok"
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        shell = [r for r in rt.store.calls(sid) if r.name == "shell"]
        assert [(r.seq, r.outcome, r.attempt) for r in shell] == [(row.seq, "uncertain", 1)]
        result = await s.step([{"name": "read", "arguments": {"path": "."}}])
        assert any(n["kind"] == "uncertain_call" for n in result.notices), result.notices
    assert effect.read_text() == "ran\n"  # at most once: never run again


@pytest.mark.parametrize("numbered", [True, False], ids=["at-the-intent", "at-the-call-number"])
async def test_a_lock_before_the_call_starts_runs_nothing_and_leaves_nothing_to_recover(
    workspace: Path, tmp_path: Path, short_wait: None, holders: list[Holder], numbered: bool
) -> None:
    sid, db = await _db_path(workspace)
    effect = tmp_path / "effect"
    holder = Holder(tmp_path, db)
    holders.append(holder)
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        if numbered:  # this process has its block of call numbers: the intent's write meets the lock
            assert (await s.step([{"name": "read", "arguments": {"path": "."}}])).results[0].outcome == "ok"
        holder.take()
        call = {"name": "shell", "arguments": {"command": f"echo ran >> '{effect}'"}}
        with pytest.raises(StoreLocked) as caught:
            await s.step([call])
        message = str(caught.value)
        assert message.startswith(f"store {db} is locked by another process"), message
        if numbered:
            assert "could not be written, so call call_0003_00 (shell) was not started: nothing ran" in message, message
        else:
            assert "No call number could be reserved, so the call was not started: nothing ran" in message, message
        assert caught.value.ran is False
        assert not effect.exists()
        holder.release()
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid):
        assert {r.name for r in rt.store.calls(sid)} == {"read"}  # no row to settle as uncertain
        assert rt.store.unsettled_calls(sid) == []
    assert not effect.exists()


async def test_a_safe_calls_result_that_meets_the_lock_is_said_to_be_safe_to_run_again(
    workspace: Path, tmp_path: Path, short_wait: None, holders: list[Holder]
) -> None:
    sid, db = await _db_path(workspace)
    holder = Holder(tmp_path, db)
    holders.append(holder)

    @zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
    async def peek() -> str:
        """Lock the store from another process, then answer."""
        holder.take()
        return "seen"

    async with zuno.Runtime(root=workspace, tools=[peek]) as rt, rt.session(sid) as s:
        with pytest.raises(StoreLocked) as caught:
            await s.step([{"name": "peek", "arguments": {}}])
        assert "(peek) ran, but its result was not recorded (replay Safe: it may be run again)" in str(caught.value)
        holder.release()
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid):
        assert rt.store.unsettled_calls(sid) == []


CLI = (
    "import sys; import zuno.store.connection as c; c.BUSY_TIMEOUT_MS = {ms}; "
    "from zuno.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _zuno(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, in a process of its own, with the busy wait shortened."""
    return subprocess.run(
        [sys.executable, "-c", CLI.format(ms=SHORT_MS), *args],
        cwd=workspace,
        env=zuno_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_zuno_call_names_the_lock_mid_call_as_at_open_and_the_next_start_settles_the_call(
    workspace: Path, tmp_path: Path, holders: list[Holder]
) -> None:
    first = _zuno(workspace, "call", "read", '{"path": "."}')
    assert first.returncode == 0, first.stderr
    db = workspace / ".zuno" / "zuno.db"
    effect = tmp_path / "effect"
    holder = Holder(tmp_path, db)
    holders.append(holder)
    command = json.dumps({"command": _waiting_command(holder, effect)})
    mid = _zuno(workspace, "call", "-c", "shell", command)
    assert mid.returncode == 1, mid.stderr  # the call ran: not "nothing run" (2)
    (line,) = [x for x in mid.stderr.splitlines() if x.startswith("zuno: store")]
    prefix = f"zuno: store {db} is locked by another process: it stayed locked for the whole 0.4 s Zuno waits"
    assert line.startswith(prefix), mid.stderr
    assert "(shell) ran, but its result could not be recorded" in line
    assert "cannot be used" not in mid.stderr and "Traceback" not in mid.stderr
    # While it is still held, opening the store says the same, at open time (nothing run: 2).
    at_open = _zuno(workspace, "call", "-c", "read", '{"path": "."}')
    assert at_open.returncode == 2, at_open.stderr
    assert at_open.stderr.strip().splitlines()[-1].startswith(prefix), at_open.stderr
    holder.release()
    after = _zuno(workspace, "call", "-c", "--json", "read", '{"path": "."}')
    assert after.returncode == 0, after.stderr
    notices = json.loads(after.stdout)["notices"]
    assert [n["kind"] for n in notices] == ["uncertain_call"], notices
    assert "(shell, attempt 1" in notices[0]["text"] and "it was not re-run" in notices[0]["text"], notices
    assert effect.read_text() == "ran\n"


async def test_an_extension_tools_own_locked_database_is_that_tools_error_not_the_stores(
    workspace: Path, tmp_path: Path, short_wait: None, holders: list[Holder]
) -> None:
    own = tmp_path / "own.db"
    sqlite3.connect(own).close()
    holder = Holder(tmp_path, own)
    holders.append(holder)

    @zuno.tool(effect="SideEffecting", replay="Never", concurrency="Exclusive")
    async def own_write() -> str:
        """Write to the tool's own database, which another process holds locked."""
        c = sqlite3.connect(own, timeout=0.05)
        try:
            c.execute("CREATE TABLE IF NOT EXISTS t (x)")
        finally:
            c.close()
        return "written"

    @zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
    async def says_locked() -> str:
        """A tool that raises the bare error itself."""
        raise sqlite3.OperationalError("database is locked")

    async with zuno.Runtime(root=workspace, tools=[own_write, says_locked]) as rt, rt.session() as s:
        holder.take()
        result = await s.step([{"name": "own_write", "arguments": {}}, {"name": "says_locked", "arguments": {}}])
        for rec, name in zip(result.results, ("own_write", "says_locked"), strict=True):
            assert rec.outcome == "error", rec.text
            assert rec.text.startswith(f"[error] {name} failed inside the tool: OperationalError: database is locked")
            assert "store" not in rec.text and "another process" not in rec.text, rec.text
        holder.release()
        rows = rt.store.calls(s.id)
        assert [(r.name, r.outcome) for r in rows] == [("own_write", "error"), ("says_locked", "error")]


def test_open_time_and_mid_use_share_the_words(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    locked = StoreLocked(db, 30_000)
    assert isinstance(locked, StoreUnusable)
    assert str(locked).startswith(connection.locked_text(db, 30_000) + ". ")
    waits = "the whole 30 s Zuno waits (a program holding a transaction open on it)"
    assert connection.locked_text(db, 30_000).endswith(waits)

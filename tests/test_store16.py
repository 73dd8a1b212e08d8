"""The store's busy wait, interruptible (sixteenth round).

Before, the busy wait for a lock another process holds ran inside SQLite on the event loop's
thread: a Ctrl-C during it was handled only when the whole wait ended (30 s by default), so
``zuno call`` on a store another program kept locked was deaf to Ctrl-C that long. Now SQLite
waits a slice at a time and the statement is tried again until the same whole wait is spent; a
SIGINT between tries ends the wait (``StoreWaitInterrupted``) and the command exits 130.

All real: the CLI in a process of its own with its busy wait set (``BUSY_TIMEOUT_MS``), a second
process holding ``BEGIN EXCLUSIVE`` on the store, a real SIGINT. Times are compared with the
configured wait, never with an absolute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_store_locked_midcall import Holder
from test_wait16 import _interrupt_at_open, interrupt
from test_wait16 import _start as _start_announcing
from zuno.store import Store, StoreLocked, connection

from conftest import zuno_env

WAIT_MS = 4000  # the busy wait of the command under test: an interrupted one ends in under half
SHORT_MS = 800  # the busy wait of the one left to run out


@pytest.fixture
def holder(workspace: Path, tmp_path: Path) -> Iterator[Holder]:
    h = Holder(tmp_path, workspace / ".zuno" / "zuno.db")
    yield h
    h.stop()


def _start(workspace: Path, ms: int, *args: str) -> subprocess.Popen[str]:
    """The CLI with its busy wait set to ``ms`` (in the store's own slices)."""
    return _start_announcing(workspace, *args, ms=ms, slice_ms=connection.SLICE_MS)


def _first_session(workspace: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "zuno", "call", "read", '{"path": "."}', "--json", "--root", str(workspace)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=zuno_env(), timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session"])


def _interrupt_after(child: subprocess.Popen[str], seconds: float) -> tuple[str, float]:
    """SIGINT to the child ``seconds`` into the lock wait; its stderr and how long it took to exit
    after the signal."""
    time.sleep(seconds)  # (into the wait: not a timing assertion)
    assert child.poll() is None, child.communicate()
    return interrupt(child)


def test_ctrl_c_ends_the_busy_wait_of_zuno_call_at_open(workspace: Path, holder: Holder) -> None:
    _first_session(workspace)
    holder.take()
    # The signal goes 0.5 s after the child says it opens the store (not 0.5 s after its start: on a
    # loaded machine that could land in its imports), with the store's own 25 ms slices.
    child = _start(workspace, WAIT_MS, "call", "read", '{"path": "."}', "-c")
    err, after = _interrupt_at_open(child, into=0.5)
    assert after < WAIT_MS / 1000 / 2, f"exited {after:.2f} s after Ctrl-C, with a busy wait of {WAIT_MS} ms"
    assert child.returncode == 130, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "Zuno stopped waiting for it after" in err and "(interrupted)" in err, err
    assert "stayed locked for the whole" not in err, err


def test_ctrl_c_ends_the_busy_wait_of_a_call_whose_result_meets_the_lock(
    workspace: Path, tmp_path: Path, holder: Holder
) -> None:
    sid = _first_session(workspace)
    effect = tmp_path / "effect"
    command = (f"touch '{holder.go}'; while [ ! -e '{holder.held}' ]; do sleep 0.01; done; "
               f"echo ran >> '{effect}'; echo done")
    child = _start(workspace, WAIT_MS, "call", "shell", json.dumps({"command": command}), "--session", sid)
    while not holder.held.exists():  # the call runs, and the store is locked under it
        assert child.poll() is None, child.communicate()
        time.sleep(0.01)
    err, after = _interrupt_after(child, 0.5)
    assert after < WAIT_MS / 1000 / 2, f"exited {after:.2f} s after Ctrl-C, with a busy wait of {WAIT_MS} ms"
    assert child.returncode == 130, err
    assert "Traceback" not in err and "internal error" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("zuno: store")]
    assert "Zuno stopped waiting for it after" in line and "(interrupted)" in line, line
    assert "ran, but its result could not be recorded" in line, line  # what became of the call
    assert effect.read_text() == "ran\n"


def test_a_wait_not_interrupted_lasts_the_whole_configured_time(workspace: Path, holder: Holder) -> None:
    _first_session(workspace)
    holder.take()
    began = time.monotonic()
    child = _start(workspace, SHORT_MS, "call", "read", '{"path": "."}', "-c")
    _out, err = child.communicate(timeout=60)
    took = time.monotonic() - began
    assert child.returncode == 2, err
    assert f"it stayed locked for the whole {SHORT_MS / 1000:g} s Zuno waits" in err, err
    assert took >= SHORT_MS / 1000, f"{took:.2f} s for a busy wait of {SHORT_MS} ms"


# -- after a lock, a short write of another process is waited for ---------------------------------

LOCK_MS = 600  # the busy wait of the store under test (in this process)

SHORT_WRITER = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    db, go, held = sys.argv[1:4]
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
    c = sqlite3.connect(db, isolation_level=None, timeout=10)
    c.execute("BEGIN IMMEDIATE")  # another process's own short write
    open(held, "w").close()
    time.sleep(0.03)
    c.execute("INSERT INTO sessions (id, created_at, root, profile) VALUES ('ses_other', 0, '/other', 'zuno')")
    c.execute("COMMIT")
    c.close()
    """
)


@pytest.fixture
def locked_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Store, Holder, str]]:
    """A store of this process (busy wait ``LOCK_MS``) whose last write found it locked for a whole
    busy wait by the holder, still holding it."""
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", LOCK_MS)
    db = tmp_path / "zuno.db"
    store = Store(db)
    sid = store.ensure_session(None, str(tmp_path), "zuno")
    holder = Holder(tmp_path, db)
    try:
        holder.take()
        with pytest.raises(StoreLocked):
            store.add_event(sid, "first", {})
        yield store, holder, sid
    finally:
        holder.stop()
        store.close()


def test_after_a_lock_another_processs_short_write_is_waited_for_not_reported(
    tmp_path: Path, locked_store: tuple[Store, Holder, str]
) -> None:
    store, holder, sid = locked_store
    holder.release()
    go, held = tmp_path / "go2", tmp_path / "held2"
    writer = subprocess.Popen([sys.executable, "-c", SHORT_WRITER, str(store.path), str(go), str(held)])
    try:
        go.touch()
        while not held.exists():  # the other process is in its short write now
            assert writer.poll() is None
            time.sleep(0.001)
        store.add_event(sid, "second", {})  # waits for that write, then goes through
        assert writer.wait(30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert [e["kind"] for e in store.events(sid)][-1] == "second"


def test_after_a_lock_a_lock_still_held_is_reported_without_a_second_busy_wait(
    locked_store: tuple[Store, Holder, str],
) -> None:
    store, _holder, sid = locked_store
    began = time.monotonic()
    with pytest.raises(StoreLocked) as caught:
        store.add_event(sid, "second", {})
    took = time.monotonic() - began
    assert took < LOCK_MS / 1000 / 2, f"{took:.2f} s after a lock, with a busy wait of {LOCK_MS} ms"
    assert f"it stayed locked for the whole {LOCK_MS / 1000:g} s Zuno waits" in str(caught.value)

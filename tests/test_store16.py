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
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_store_locked_midcall import CLI, Holder

from conftest import zuno_env

WAIT_MS = 4000  # the busy wait of the command under test: an interrupted one ends in under half
SHORT_MS = 1200  # the busy wait of the one left to run out


@pytest.fixture
def holder(workspace: Path, tmp_path: Path) -> Iterator[Holder]:
    h = Holder(tmp_path, workspace / ".zuno" / "zuno.db")
    yield h
    h.stop()


def _start(workspace: Path, ms: int, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI.format(ms=ms), *args, "--root", str(workspace)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=zuno_env({"NO_COLOR": "1"}),
    )


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
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return err, time.monotonic() - sent


def test_ctrl_c_ends_the_busy_wait_of_zuno_call_at_open(workspace: Path, holder: Holder) -> None:
    _first_session(workspace)
    holder.take()
    child = _start(workspace, WAIT_MS, "call", "read", '{"path": "."}', "-c")
    err, after = _interrupt_after(child, 0.5)
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

"""``zuno run`` spends ONE busy wait on a store another process keeps locked (outside testing,
thirteenth round).

Before, a call whose tool met the lock while it ran (the shell tool's receipt write waited the
whole busy wait) was followed by the settle of that call, which waited the whole busy wait again:
about 63 s with the default 30 s before the run said anything. Now a write that follows a lock met
for a whole busy wait tries once, without waiting (``zuno.store.transaction.once_if_locked``); the
lock is then reported in the same words, with the same exit status.

All real: the CLI in a process of its own with its busy wait set (``BUSY_TIMEOUT_MS``), the loopback
fake model provider, and a second process holding ``BEGIN EXCLUSIVE`` on the store. The time is
compared with the configured busy wait, never with an absolute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_run_store_locked import _config, _session, _turns
from test_store_locked_midcall import CLI, Holder

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply

WAIT_MS = 2000  # the busy wait of the run under test: long enough to tell one wait from two


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


@pytest.fixture
def holder(workspace: Path, tmp_path: Path) -> Iterator[Holder]:
    h = Holder(tmp_path, workspace / ".zuno" / "zuno.db")
    yield h
    h.stop()


def test_a_lock_met_while_a_call_runs_costs_one_busy_wait_then_is_reported(
    workspace: Path, tmp_path: Path, fake: FakeProvider, holder: Holder
) -> None:
    _config(workspace, fake)
    sid = _session(workspace, fake)
    effect = tmp_path / "effect"
    command = (f"touch '{holder.go}'; while [ ! -e '{holder.held}' ]; do sleep 0.01; done; "
               f"echo ran >> '{effect}'; echo done")
    fake.script(Reply(calls=[Call("shell", json.dumps({"command": command}))]))
    argv = [sys.executable, "-c", CLI.format(ms=WAIT_MS), "run", "-c", "run it", "--root", str(workspace)]
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=zuno_env({"NO_COLOR": "1"}))
    try:
        while not holder.held.exists():  # the call runs, and the store is locked under it
            assert child.poll() is None, child.communicate()
            time.sleep(0.01)
        locked_at = time.monotonic()
        _out, err = child.communicate(timeout=120)
        waited = time.monotonic() - locked_at
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 1, err  # the call ran
    assert "internal error" not in err and "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("zuno: store")]
    assert "it stayed locked for the whole 2 s Zuno waits" in line, line
    assert "Call call_1 (shell) ran, but its result could not be recorded" in line, line
    assert f"`zuno resume {sid}` goes on once the store is free" in line, line
    # One busy wait was spent (the tool's own write), and not a second one (the settle, the close).
    assert WAIT_MS / 1000 <= waited < 2 * WAIT_MS / 1000, f"{waited:.2f} s for a busy wait of {WAIT_MS} ms"
    assert effect.read_text() == "ran\n"
    holder.release()
    fake.script(Reply(text="looked at it"))
    after = subprocess.run([sys.executable, "-m", "zuno", "resume", sid, "--json", "--root", str(workspace)],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, env=zuno_env(), timeout=120)
    assert after.returncode == 0, after.stderr
    assert effect.read_text() == "ran\n"  # never run again
    assert [t["stop_reason"] for t in _turns(workspace)] == ["final", "interrupted", "final"]

"""``zuno run`` with its store locked by another process (outside testing, twelfth round).

Before, ``zuno run`` said "the agent stopped on an internal error: StoreLocked: …" (exit 1) when
the lock came mid-turn, and "internal error: StoreUnusable: …" (exit 1, although nothing ran)
when it was there before the run began. Now it says what ``zuno call`` says: the file, that
another process holds it, what became of the call, then what became of the run; exit 1 when
anything ran (a request to the model, a call), 2 when nothing did. With ``--json`` the same words
on standard error and no final object (as for every other error).

All real: the CLI in a process of its own (``zuno.cli.main``, what ``python -m zuno`` runs, with
the busy wait shortened), the loopback fake model provider speaking the Chat Completions wire
format, and a second process holding ``BEGIN EXCLUSIVE`` on the store.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_store_locked_midcall import CLI, SHORT_MS, Holder

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply

ARGS = [[], ["--json"]]
IDS = ["human", "json"]


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


@pytest.fixture
def holder(workspace: Path, tmp_path: Path) -> Iterator[Holder]:
    h = Holder(tmp_path, workspace / ".zuno" / "zuno.db")
    yield h
    h.stop()


def _config(root: Path, fake: FakeProvider) -> None:
    provider = {"api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"},
                "models": {"m1": {"context": 65536, "output": 2048}}}
    rules = {"rules": [{"tool": "shell", "action": "allow"}]}
    (root / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": provider},
                                                "permission": rules}))


def _argv(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", CLI.format(ms=SHORT_MS), *args, "--root", str(root)]


def _zuno(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_argv(root, *args), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=zuno_env({"NO_COLOR": "1"}), timeout=120)


def _session(root: Path, fake: FakeProvider) -> str:
    """A session with one finished turn: the store exists, with the session in it."""
    fake.script(Reply(text="hello"))
    p = _zuno(root, "run", "hi", "--json")
    assert p.returncode == 0, p.stderr
    return str(json.loads(p.stdout)["session"])


def _turns(root: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(root / ".zuno" / "zuno.db")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM agent_turns ORDER BY n")]
    finally:
        db.close()


def _said(p: subprocess.CompletedProcess[str], db: Path) -> str:
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("zuno: store")]
    prefix = f"zuno: store {db} is locked by another process: it stayed locked for the whole 0.4 s Zuno waits"
    assert line.startswith(prefix), p.stderr
    assert p.stdout == "", p.stdout  # no final object, no partial one
    return line


@pytest.mark.parametrize("extra", ARGS, ids=IDS)
def test_a_lock_met_by_a_call_of_the_run_names_the_store_and_what_became_of_call_and_run(
    workspace: Path, tmp_path: Path, fake: FakeProvider, holder: Holder, extra: list[str]
) -> None:
    _config(workspace, fake)
    sid = _session(workspace, fake)
    effect = tmp_path / "effect"
    command = (f"touch '{holder.go}'; while [ ! -e '{holder.held}' ]; do sleep 0.01; done; "
               f"echo ran >> '{effect}'; echo done")
    fake.script(Reply(calls=[Call("shell", json.dumps({"command": command}))]))
    p = _zuno(workspace, "run", "-c", "run it", *extra)
    assert p.returncode == 1, p.stderr  # the call ran: not "nothing run" (2)
    line = _said(p, workspace / ".zuno" / "zuno.db")
    assert "Call call_1 (shell) ran, but its result could not be recorded" in line, line
    assert f"`zuno resume {sid}` goes on once the store is free" in line, line
    assert effect.read_text() == "ran\n"
    assert len(fake.requests) == 2  # nothing asked of the model after the lock
    holder.release()
    # Once the lock is gone the session goes on: the call is uncertain, never run again.
    fake.script(Reply(text="looked at it"))
    after = _zuno(workspace, "resume", sid, "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["stop_reason"] == "final"
    assert effect.read_text() == "ran\n"
    (result,) = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("[uncertain"), result["content"]
    assert [t["stop_reason"] for t in _turns(workspace)] == ["final", "interrupted", "final"]


@pytest.mark.parametrize("extra", ARGS, ids=IDS)
def test_a_lock_held_before_the_run_begins_runs_nothing_and_exits_2(
    workspace: Path, fake: FakeProvider, holder: Holder, extra: list[str]
) -> None:
    _config(workspace, fake)
    sid = _session(workspace, fake)
    holder.take()
    fake.script(Reply(text="never asked"))
    p = _zuno(workspace, "run", "--session", sid, "go on", *extra)
    assert p.returncode == 2, p.stderr  # nothing ran
    line = _said(p, workspace / ".zuno" / "zuno.db")
    assert line.endswith(f"Nothing was run in session {sid}: no request went to the model and no call started."), line
    assert len(fake.requests) == 1  # the first run's only
    holder.release()
    assert [t["stop_reason"] for t in _turns(workspace)] == ["final"]


@pytest.mark.parametrize("extra", ARGS, ids=IDS)
def test_a_lock_taken_while_the_model_answers_says_the_run_stopped_and_exits_1(
    workspace: Path, fake: FakeProvider, holder: Holder, extra: list[str]
) -> None:
    _config(workspace, fake)
    sid = _session(workspace, fake)
    fake.script(Reply(text=["an ", "answer ", "in ", "parts"], delay_s=0.3))
    child = subprocess.Popen(_argv(workspace, "run", "-c", "say something", *extra), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=zuno_env({"NO_COLOR": "1"}))
    try:
        deadline = time.monotonic() + 60
        while not (len(fake.requests) == 2 and fake.requests[1].text_written_at):
            assert child.poll() is None and time.monotonic() < deadline, "the stream never began"
            time.sleep(0.01)
        holder.take()  # the request went out (recorded first); its answer cannot be recorded
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    p = subprocess.CompletedProcess(child.args, child.returncode, out if extra else "", err)
    assert p.returncode == 1, err  # the model was asked: something ran
    line = _said(p, workspace / ".zuno" / "zuno.db")
    assert f"The run of session {sid} stopped there" in line, line
    if extra:
        assert out == ""
    holder.release()
    fake.script(Reply(text="answered"))
    after = _zuno(workspace, "resume", sid, "--json")
    assert after.returncode == 0, after.stderr
    assert [t["stop_reason"] for t in _turns(workspace)] == ["final", "interrupted", "final"]

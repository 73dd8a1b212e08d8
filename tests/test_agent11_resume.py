"""``zuno run`` stopped from outside and resumed (eleventh round): a SIGTERM in the middle of a
model stream or of a tool call, a kill -9 in the middle of a stream. The turn that was stopped is
recorded as ended (it stayed "open" for good: ``zuno show`` printed ``stop open`` forever), and
the resumed session replays nothing and loses nothing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _config(root: Path, fake: FakeProvider) -> None:
    provider = {"api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"},
                "models": {"m1": {"context": 65536, "output": 2048}}}
    rules = {"rules": [{"tool": "shell", "action": "allow"}]}
    (root / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": provider},
                                                "permission": rules}))


def _start(root: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "zuno", "run", *args, "--root", str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=zuno_env({"NO_COLOR": "1"}), start_new_session=True,
    )


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "zuno", *args, "--root", str(root)], capture_output=True,
                          stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1"}), timeout=60)


def _wait(cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _turns(root: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(root / ".zuno" / "zuno.db")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM agent_turns ORDER BY n")]
    finally:
        db.close()


def _streaming(fake: FakeProvider) -> bool:
    return bool(fake.requests) and len(fake.requests[0].text_written_at) >= 2


def test_sigterm_during_the_model_stream_ends_the_turn_on_record(workspace: Path, fake: FakeProvider) -> None:
    _config(workspace, fake)
    fake.script(Reply(text=["partial ", "answer"], stall_s=30))
    child = _start(workspace, "say something", "--json")
    try:
        _wait(lambda: _streaming(fake), "the stream never began")
        time.sleep(0.3)
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 143
    finally:
        if child.poll() is None:
            child.kill()
    (turn,) = _turns(workspace)
    assert turn["stop_reason"] == "interrupted" and turn["ended_at"] is not None
    assert "cancelled from outside" in turn["stop_detail"]
    shown = _cli(workspace, "show", json.loads(_cli(workspace, "sessions", "--json").stdout)["sessions"][0]["id"])
    assert b"stop open" not in shown.stdout and b"stop interrupted" in shown.stdout


def test_sigterm_during_a_tool_call_ends_the_turn_and_resume_does_not_rerun_it(
    workspace: Path, fake: FakeProvider
) -> None:
    _config(workspace, fake)
    command = "echo ran >> runs.log; sleep 30"
    fake.script(Reply(calls=[Call("shell", json.dumps({"command": command}))]))
    child = _start(workspace, "run it")
    try:
        _wait(lambda: (workspace / "runs.log").exists(), "the command never started")
        time.sleep(0.3)
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 143
    finally:
        if child.poll() is None:
            child.kill()
    (turn,) = _turns(workspace)
    assert turn["stop_reason"] == "interrupted" and turn["ended_at"] is not None
    fake.script(Reply(text="looked at it"))
    sid = json.loads(_cli(workspace, "sessions", "--json").stdout)["sessions"][0]["id"]
    p = _cli(workspace, "resume", sid, "--json")
    assert p.returncode == 0, p.stderr
    assert (workspace / "runs.log").read_text() == "ran\n"  # not replayed
    messages = fake.requests[-1].body["messages"]
    (result,) = [m for m in messages if m["role"] == "tool"]
    assert result["content"].startswith("[uncertain: cancelled while the command was running]")
    assert [t["stop_reason"] for t in _turns(workspace)] == ["interrupted", "final"]


def test_kill_9_during_the_stream_leaves_the_turn_ended_once_the_session_resumes(
    workspace: Path, fake: FakeProvider
) -> None:
    _config(workspace, fake)
    fake.script(Reply(text=["partial ", "answer"], stall_s=30))
    child = _start(workspace, "say something")
    try:
        _wait(lambda: _streaming(fake), "the stream never began")
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    (turn,) = _turns(workspace)
    assert turn["ended_at"] is None  # nothing could record it: the process was killed
    fake.script(Reply(text="answered"))
    p = _cli(workspace, "run", "-c", "go on", "--json")
    assert p.returncode == 0, p.stderr
    first, second = _turns(workspace)
    assert first["stop_reason"] == "interrupted" and first["ended_at"] is not None
    assert "process driving the session stopped" in first["stop_detail"]
    assert first["started_at"] <= first["ended_at"] <= second["started_at"]
    assert second["stop_reason"] == "final"
    # The prompt the model never answered is sent again, once, before the new one.
    users = [m["content"] for m in fake.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["say something", "go on"]


def test_sigterm_with_json_still_prints_the_one_final_object(workspace: Path, fake: FakeProvider) -> None:
    """Before: ``zuno run --json`` terminated by SIGTERM (a `timeout`, a CI runner) printed nothing
    on stdout, so the caller's JSON parse failed. Now the final object says it was interrupted."""
    _config(workspace, fake)
    fake.script(Reply(text=["partial ", "answer"], stall_s=30))
    child = _start(workspace, "say something", "--json")
    try:
        _wait(lambda: _streaming(fake), "the stream never began")
        time.sleep(0.3)
        child.send_signal(signal.SIGTERM)
        out, _err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143
    final = json.loads(out)
    sid = json.loads(_cli(workspace, "sessions", "--json").stdout)["sessions"][0]["id"]
    assert final["session"] == sid and final["stop_reason"] == "interrupted"
    assert "cancelled from outside" in final["detail"] and final["turns"] == 1
    assert set(final) == {"session", "stop_reason", "detail", "final_text", "steps", "usage", "turns"}

"""Agent streaming (sixteenth round): what the thirteenth round found and left.

1. ``zuno show`` told an answer still streaming in a live process from one whose process died
   apart by nothing ("never completed" for both): the saved row now names its writer (pid, start
   time from /proc/<pid>/stat, boot id), which ``zuno show`` checks against /proc.
2. A turn ended by ``Agent._after_lock`` (the store locked mid-turn) was not recovered by the next
   turn, so its saved streamed text stayed shown as a partial response for good.
3. A request that failed mid-stream (a provider error after some text) dropped the text streamed:
   it is kept, marked failed with the error, and sent to the model marked as cut off.

Everything runs for real: ``zuno run`` / ``zuno show`` processes against the loopback fake model
server speaking the wire format, a lock held by another process, /proc of real processes.
"""

from __future__ import annotations

import asyncio
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

import zuno
from test_store_locked_midcall import SHORT_MS, Holder
from zuno import limits
from zuno.agent.api import LOCKED_TURN_TEXT
from zuno.agent.events import TextEvent
from zuno.agent.items import FAILED_MARK, INTERRUPTED_MARK
from zuno.agent.transcript import PARTIAL_LOCKED_TEXT, Transcript
from zuno.agent.writer import this_process, writer_state
from zuno.commands.show import transcript_json
from zuno.process import procfs
from zuno.store import Store, StoreLocked, connection

from conftest import zuno_env
from fake_provider import Fail, FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _config(root: Path, fake: FakeProvider, api: str = "openai-chat", **options: Any) -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    provider = {"api": api, "options": {"baseURL": base, "apiKey": "k", **options},
                "models": {"m1": {"context": 65536, "output": 2048}}}
    (root / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": provider}}))


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "zuno", *args, "--root", str(root)], capture_output=True,
                          stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1"}), timeout=60)


def _saved(root: Path) -> list[tuple[str, int | None]]:
    """The saved streamed text rows (text, writer pid); [] while there are none."""
    path = root / ".zuno" / "zuno.db"
    if not path.exists():
        return []
    db = sqlite3.connect(path, timeout=5)
    try:
        return db.execute("SELECT text, writer_pid FROM agent_partials").fetchall()
    except sqlite3.OperationalError:  # no such table (column) yet: the store is being made
        return []
    finally:
        db.close()


def _start_run(root: Path, prompt: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "zuno", "run", prompt, "--root", str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=zuno_env({"NO_COLOR": "1"}), start_new_session=True,
    )


def _wait_saved(root: Path, child: subprocess.Popen[bytes], piece: str) -> None:
    deadline = time.monotonic() + 20
    while not any(piece in text for text, _ in _saved(root)):
        assert child.poll() is None, child.stderr.read() if child.stderr else b""
        assert time.monotonic() < deadline, "no streamed text was ever saved"
        time.sleep(0.05)


def _session(root: Path) -> str:
    db = sqlite3.connect(root / ".zuno" / "zuno.db", timeout=5)
    try:
        (sid,) = db.execute("SELECT id FROM sessions").fetchone()
    finally:
        db.close()
    return str(sid)


def _partial_responses(root: Path, sid: str) -> list[dict[str, Any]]:
    """``zuno show --json``'s partial_responses, made by its own function on a store of this process."""
    store = Store(root / ".zuno" / "zuno.db")
    try:
        return list(transcript_json(Transcript(store, sid))["partial_responses"])
    finally:
        store.close()


# -- 1. still streaming, or its process died -----------------------------------------------------


def test_show_tells_an_answer_still_streaming_from_one_whose_process_died(workspace: Path, fake: FakeProvider) -> None:
    _config(workspace, fake)
    # Streams its text (over the size bound: saved at once), then stalls before its end: paused
    # mid-stream while `zuno show` looks from another process.
    said = "a" * limits.STREAM_SAVE_BYTES + " second piece; "
    fake.script(Reply(text=[said], stall_s=30))
    child = _start_run(workspace, "tell me")
    try:
        _wait_saved(workspace, child, "second piece; ")
        sid = _session(workspace)
        live = _cli(workspace, "show", sid)
        assert live.returncode == 0, live.stderr
        text = live.stdout.decode()
        assert f"still streaming (pid {child.pid})" in text and "second piece;  [streaming…]" in text
        assert "died" not in text and "[interrupted]" not in text
        # `zuno show --json`'s record of it, read here (a process other than the writer, too).
        (partial,) = _partial_responses(workspace, sid)
        assert partial["state"] == "streaming" and partial["streaming"] is True
        assert partial["interrupted"] is False and partial["writer_pid"] == child.pid

        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    dead = _cli(workspace, "show", sid).stdout.decode()
    assert "interrupted: the process died before the answer completed" in dead
    assert "still streaming" not in dead and "second piece;  [interrupted]" in dead
    (partial,) = _partial_responses(workspace, sid)
    assert partial["state"] == "interrupted" and partial["streaming"] is False and partial["interrupted"] is True


def test_a_reused_pid_or_a_zombie_is_not_the_writer() -> None:
    me = this_process()
    assert me.start is not None and me.boot is not None  # /proc says both here
    assert writer_state(me.pid, me.start, me.boot) == "streaming"
    # The same pid started at another time is another process (the pid was reused).
    assert writer_state(me.pid, me.start + 1, me.boot) == "died"
    assert writer_state(me.pid, me.start, "another-boot") == "died"
    assert writer_state(None, None, None) == "unknown"
    # A process killed but not yet reaped (a zombie) is dead: it writes nothing any more.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        st = procfs.stat(child.pid)
        assert st is not None
        assert writer_state(child.pid, st[1], me.boot) == "streaming"
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while (now := procfs.stat(child.pid)) is not None and now[2] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert writer_state(child.pid, st[1], me.boot) == "died"
    finally:
        child.kill()
        child.wait(10)
    assert writer_state(child.pid, st[1], me.boot) == "died"  # reaped: no such process


# -- 2. a turn the store's lock ended -------------------------------------------------------------


def test_the_next_run_recovers_the_text_saved_of_an_answer_the_lock_kept_from_the_record(
    workspace: Path, fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", SHORT_MS)
    _config(workspace, fake)
    big = "x" * (limits.STREAM_SAVE_BYTES + 100)  # saved as soon as it arrives (the size bound)
    fake.script(Reply(text=[big, "tail"]), Reply(text="after the lock"))
    holder = Holder(tmp_path, workspace / ".zuno" / "zuno.db")

    def lock_at_the_second_delta(ev: Any) -> None:
        # The first delta's text is saved by now; another process locks the store before the
        # answer's outcome (and the drop of its saved text) is written.
        if isinstance(ev, TextEvent) and ev.text == "tail":
            holder.take()

    async def go() -> tuple[list[Any], list[Any], list[dict[str, Any]], str]:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent() as agent:
                with pytest.raises(StoreLocked):
                    await agent.run("answer", on_event=lock_at_the_second_delta)
                holder.release()
                result = await agent.run("go on")
                assert result.final_text == "after the lock"
                t = agent.transcript
                return t.partials(), t.items(), t.turns(), agent.id

    try:
        partials, items, turns, _ = asyncio.run(go())
    finally:
        holder.stop()
    assert partials == []  # before: the saved row stayed, shown as a partial response for good
    answers = [i for i in items if i.kind == "assistant"]
    assert answers[0].data["text"] == big and answers[0].data["interrupted"] is True and answers[0].turn == 1
    assert answers[0].data["recovered"] == PARTIAL_LOCKED_TEXT
    assert answers[1].data["text"] == "after the lock"
    assert [(t["stop_reason"], t["stop_detail"]) for t in turns] == [
        ("interrupted", LOCKED_TURN_TEXT), ("final", turns[1]["stop_detail"])
    ]
    # The model was sent the saved text marked as cut off, once.
    sent = [m for m in fake.requests[-1].body["messages"] if m["role"] == "assistant"]
    assert len(sent) == 1 and sent[0]["content"].startswith(big) and INTERRUPTED_MARK in sent[0]["content"]


# -- 3. a request that failed mid-stream -----------------------------------------------------------


def _text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


@pytest.mark.parametrize(
    ("api", "broken", "category"),
    [
        # The Responses API's error event after the text deltas, no retry configured
        ("openai-responses", Reply(text=["half ", "an answer"], error=Fail(500)), None),
        # Chat Completions: the connection dropped after the text deltas, no retry configured
        ("openai-chat", Reply(text=["half ", "an answer"], cut=True), None),
    ],
    ids=["error-event", "dropped-connection"],
)
def test_the_text_streamed_before_a_provider_error_is_kept_marked_failed_and_sent_marked(
    workspace: Path, fake: FakeProvider, api: str, broken: Reply, category: str | None
) -> None:
    _config(workspace, fake, api, maxRetries=0)
    fake.script(broken, Reply(text="the whole answer"))

    async def go() -> tuple[Any, Any, list[Any], list[Any], list[dict[str, Any]], str]:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent() as agent:
                failed = await agent.run("tell me")
                again = await agent.run("try again")
                t = agent.transcript
                return failed, again, t.items(), t.requests(), t.partials(), agent.id

    failed, again, items, requests, partials, sid = asyncio.run(go())
    assert failed.stop_reason == "provider_error" and again.final_text == "the whole answer"
    assert partials == []
    first = requests[0]
    assert first.status == "failed" and first.error
    answers = [i for i in items if i.kind == "assistant"]
    # Before: the text streamed was dropped; the user had read it, the record had nothing of it.
    kept = answers[0]
    assert kept.data["text"] == "half an answer" and kept.request_id == first.id and kept.turn == 1
    assert kept.data["failed"]["error"] == first.error and kept.data["tool_calls"] == []
    if category is not None:
        assert kept.data["failed"]["category"] == category
    # The next request sends it marked as cut off by the error, never as a complete answer.
    body = fake.requests[-1].body
    sent = [m for m in body.get("messages") or body["input"] if m.get("role") == "assistant"]
    assert len(sent) == 1
    mark = FAILED_MARK.format(category=kept.data["failed"]["category"])
    assert _text_of(sent[0]) == "half an answer\n" + mark
    if api != "openai-responses":
        return
    # zuno show says it failed, and why.
    shown = _cli(workspace, "show", sid).stdout.decode()
    line = next(ln for ln in shown.splitlines() if "half an answer" in ln)
    assert f"[failed ({kept.data['failed']['category']}): the request failed before the answer completed" in line
    assert "(purpose turn, turn 1) failed after 1 attempt" in shown

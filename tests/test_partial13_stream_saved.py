"""A model's answer is durable while it streams (thirteenth round). Before, the text the user had
already read on the terminal was written only once the response completed: a ``zuno run`` killed
mid-stream (kill -9, power loss) lost it from the record, ``zuno show`` said nothing of it and
``zuno resume`` went on as if it had never been written. Now the text so far is saved in a row per
request (``agent_partials``) at most every ``STREAM_SAVE_INTERVAL_S`` or ``STREAM_SAVE_BYTES``;
the next turn records such a request as interrupted, its text as an interrupted assistant item."""

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
from agent_double import ScriptedProvider, say
from zuno import limits
from zuno.agent.items import INTERRUPTED_MARK

from conftest import zuno_env
from fake_provider import FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _config(root: Path, fake: FakeProvider) -> None:
    provider = {"api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"},
                "models": {"m1": {"context": 65536, "output": 2048}}}
    (root / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": provider}}))


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "zuno", *args, "--root", str(root)], capture_output=True,
                          stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1"}), timeout=60)


def _saved_text(root: Path) -> str:
    """The streamed text saved so far ('' while there is none, or no such table)."""
    path = root / ".zuno" / "zuno.db"
    if not path.exists():
        return ""
    db = sqlite3.connect(path, timeout=5)
    try:
        rows = db.execute("SELECT text FROM agent_partials").fetchall()
    except sqlite3.OperationalError:  # the table does not exist (or the store is being made)
        return ""
    finally:
        db.close()
    return "".join(r[0] for r in rows)


PIECES = [f"piece {i}; " for i in range(10)]


def test_kill_9_mid_stream_keeps_the_text_shown_and_resume_records_it_interrupted(
    workspace: Path, fake: FakeProvider
) -> None:
    _config(workspace, fake)
    # Streams slowly (a piece every 0.2 s), then stalls before its end: killed while streaming.
    fake.script(Reply(text=PIECES, delay_s=0.2, stall_s=30))
    child = subprocess.Popen(
        [sys.executable, "-m", "zuno", "run", "tell me", "--root", str(workspace)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=zuno_env({"NO_COLOR": "1"}), start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while "piece 4; " not in _saved_text(workspace):  # a save after the first one (an append)
            assert child.poll() is None, child.stderr.read() if child.stderr else b""
            assert time.monotonic() < deadline, "no streamed text was ever saved"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    saved = _saved_text(workspace)
    assert saved.startswith("piece 0; piece 1; piece 2; piece 3; piece 4; ")
    sid = json.loads(_cli(workspace, "sessions", "--json").stdout)["sessions"][0]["id"]

    # `zuno show` (JSON and text) has the partial text, marked as never completed.
    shown = _cli(workspace, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    (partial,) = json.loads(shown.stdout)["partial_responses"]
    assert partial["text"] == saved and partial["interrupted"] is True and partial["complete"] is False
    assert partial["turn"] == 1 and partial["purpose"] == "turn"
    text = _cli(workspace, "show", sid).stdout.decode()
    assert "piece 4; " in text and "died before the answer completed" in text and "[interrupted]" in text

    # `zuno resume` goes on, the request recorded as interrupted and its text kept in the transcript.
    fake.script(Reply(text="the rest"))
    p = _cli(workspace, "resume", sid, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["final_text"] == "the rest"
    sent = [m for m in fake.requests[-1].body["messages"] if m["role"] == "assistant"]
    assert sent and sent[0]["content"].startswith(saved) and INTERRUPTED_MARK in sent[0]["content"]
    after = json.loads(_cli(workspace, "show", sid, "--json").stdout)
    assert after["partial_responses"] == []
    first = after["requests"][0]
    assert first["status"] == "interrupted" and first["id"] == partial["request_id"]
    assert first["started_at"] <= first["ended_at"]
    assistant = [i for i in after["items"] if i["kind"] == "assistant"]
    assert assistant[0]["data"]["text"] == saved and assistant[0]["data"]["interrupted"] is True
    assert assistant[0]["request_id"] == partial["request_id"] and assistant[0]["turn"] == 1
    assert assistant[1]["data"]["text"] == "the rest"
    turns = after["turns"]
    assert [t["stop_reason"] for t in turns] == ["interrupted", "final"]
    assert turns[0]["ended_at"] <= turns[1]["started_at"]
    assert [r["status"] for r in after["requests"]] == ["interrupted", "finished"]


def _statements(workspace: Path, reply: Any) -> tuple[list[str], list[str], Any]:
    """The SQL statements of one turn answered by ``reply``, its saves of streamed text, and the result."""

    async def go() -> tuple[list[str], Any]:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent(provider=ScriptedProvider([reply])) as agent:
                seen: list[str] = []
                rt.store._db.set_trace_callback(seen.append)
                try:
                    result = await agent.run("answer")
                finally:
                    rt.store._db.set_trace_callback(None)
                left = rt.store.query("SELECT COUNT(*) FROM agent_partials")[0][0]
                assert left == 0  # a completed response drops its saved text
                return seen, (result, agent.transcript.items())

    seen, result = asyncio.run(go())
    saves = [s for s in seen if "agent_partials" in s and not s.lstrip().startswith("DELETE")]
    return seen, saves, result


def test_saves_are_bounded_by_size_and_time_and_a_short_answer_costs_none(workspace: Path) -> None:
    # A short answer (under the interval and the size) costs no statement for its streamed text.
    seen, saves, (result, _) = _statements(workspace, say("short answer", chunks=6))
    assert result.final_text == "short answer" and saves == []
    assert not [s for s in seen if "agent_partials" in s]
    # A fast long answer: a save per STREAM_SAVE_BYTES of new text, never one per delta.
    text = "x" * (limits.STREAM_SAVE_BYTES * 10)
    _, saves, (result, items) = _statements(workspace, say(text, chunks=40))
    assert result.final_text == text and len(saves) == 10
    assert saves[0].lstrip().startswith("INSERT") and all(s.lstrip().startswith("UPDATE") for s in saves[1:])
    assert [i.data["text"] for i in items if i.kind == "assistant"][-1] == text  # the item, not the partial
    # A slow short answer: a save per STREAM_SAVE_INTERVAL_S, whatever the number of deltas.
    pieces = 8
    delay = limits.STREAM_SAVE_INTERVAL_S / 4
    _, saves, (result, _) = _statements(workspace, say("y" * pieces, chunks=pieces, chunk_delay=delay))
    assert result.final_text == "y" * pieces and 1 <= len(saves) <= 2 < pieces


def test_an_interrupted_stream_keeps_its_text_as_an_item_and_drops_its_saved_row(workspace: Path) -> None:
    # The user's interrupt (Ctrl-C) after a save: the text is the interrupted item, as before, and
    # the saved row goes in the same commit (nothing is recovered twice by the next turn).
    async def go() -> tuple[Any, list[Any], int, list[str]]:
        async with zuno.Runtime(root=workspace) as rt:
            reply = say("z" * 40, chunks=40, chunk_delay=limits.STREAM_SAVE_INTERVAL_S / 8)
            async with rt.agent(provider=ScriptedProvider([reply])) as agent:
                run = asyncio.create_task(agent.run("answer"))
                deadline = time.monotonic() + 20
                while not rt.store.query("SELECT 1 FROM agent_partials"):
                    assert time.monotonic() < deadline and not run.done(), "no streamed text was ever saved"
                    await asyncio.sleep(0.02)
                agent.interrupt()
                result = await run
                left = rt.store.query("SELECT COUNT(*) FROM agent_partials")[0][0]
                statuses = [r.status for r in agent.transcript.requests()]
                return result, agent.transcript.items(), left, statuses

    result, items, left, statuses = asyncio.run(go())
    assert result.stop_reason == "interrupted" and left == 0 and statuses == ["interrupted"]
    (assistant,) = [i for i in items if i.kind == "assistant"]
    assert assistant.data["interrupted"] is True and assistant.data["text"].startswith("z")

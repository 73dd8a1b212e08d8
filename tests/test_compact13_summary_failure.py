"""A compaction whose summary request fails (an HTTP 500, a closed connection, a timeout, a 200 that
is not an event stream, an answer with no text), against the loopback fake servers over the real
wire: the summary model is a provider of its own (``agent.compaction.model``) on its own server,
so each server's script is exactly what it is asked.

Before, any such failure stopped the turn with ``provider_error``, even when the request still
fitted the model's context. Now a compaction before the budget that fails lets the request go out
uncompacted (an ``agent-compaction-failed`` event and a notice say why, and it is not paid for
again before every request of the turn); a request the server refused as too long whose
compaction fails stops the turn with a detail naming both, and what to do, and the session
resumes with everything it had."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.agent.events import AgentEvent, NoticeEvent, StopEvent

from conftest import zuno_cli
from fake_provider import Call, Drop, Fail, FakeProvider, Reply

# llama.cpp's answer to a request longer than its --ctx-size.
LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9120,
        "n_ctx": 4096,
    }
}
# A 200 whose body is a JSON object, not an event stream (a proxy, a wrong baseURL).
NOT_A_STREAM = {"id": "x", "object": "chat.completion", "choices": []}
BIG_PROMPT = "BIG-PROMPT-7c1 " + "filler words for the context " * 400  # ~12,000 characters


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


@pytest.fixture
def summariser() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def config(fake: FakeProvider, summariser: FakeProvider, *, context: int, key: str = "k") -> dict[str, Any]:
    """The turn's model fake/m1 and the summary model sum/cheap (one retry, a 400 ms timeout); only
    the read tool, so that a short first turn stays under the budget and the big prompt passes it."""
    return {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": "openai-chat",
                "options": {"baseURL": fake.base_url, "apiKey": key},
                "models": {"m1": {"context": context, "output": 256}},
            },
            "sum": {
                "api": "openai-chat",
                "options": {"baseURL": summariser.base_url, "apiKey": key, "maxRetries": 1, "timeout": 400},
                "models": {"cheap": {"context": 65536, "output": 256}},
            },
        },
        "agent": {"tools": ["read"], "compaction": {"at_fraction": 0.5, "keep_fraction": 0.2, "model": "sum/cheap"}},
    }


def two_turns(workspace: Path, overrides: dict[str, Any], second: str) -> tuple[StopEvent, list[AgentEvent]]:
    """A short first turn, then ``second`` in the same session; the second turn's result and events."""
    events: list[AgentEvent] = []

    async def main() -> None:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent() as agent:
                first = await agent.run("hello")
                assert first.stop_reason == "final", first.detail
                async for ev in agent.events(second):
                    events.append(ev)

    asyncio.run(main())
    stop = events[-1]
    assert isinstance(stop, StopEvent), events
    return stop, events


def db_rows(workspace: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def failed_events(workspace: Path) -> list[dict[str, Any]]:
    rows = db_rows(workspace, "SELECT data FROM events WHERE kind = 'agent-compaction-failed' ORDER BY seq")
    return [json.loads(r[0]) for r in rows]


def markers(workspace: Path) -> int:
    return int(db_rows(workspace, "SELECT COUNT(*) FROM agent_items WHERE kind = 'compaction'")[0][0])


# Each summary failure as the summary server plays it (one retry: a transient one is played twice).
FAILURES = {
    "http-500": ([Fail(500), Fail(500)], "server"),
    "closed-connection": ([Drop(), Drop()], "connection"),
    "timeout": ([Reply("late", stall_s=2.0), Reply("late", stall_s=2.0)], "timeout"),
    "not-a-stream": ([Fail(200, body=NOT_A_STREAM)], "protocol"),
    "no-text": ([Reply("")], "empty_summary"),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_a_failed_compaction_before_the_budget_lets_the_turn_go_on_uncompacted(
    workspace: Path, fake: FakeProvider, summariser: FakeProvider, name: str
) -> None:
    plays, category = FAILURES[name]
    (workspace / "a.txt").write_text("alpha\n")
    fake.script(Reply("hi"), Reply(calls=[Call("read", '{"path": "a.txt"}')]), Reply("done"))
    summariser.script(*plays)
    stop, events = two_turns(workspace, config(fake, summariser, context=4000), BIG_PROMPT)
    assert stop.stop_reason == "final", stop.detail
    assert stop.final_text == "done"
    # The request went out uncompacted: the first turn's messages are still there, word for word.
    sent = json.dumps(fake.requests[1].body["messages"])
    assert '"hello"' in sent and '"hi"' in sent and "BIG-PROMPT-7c1" in sent
    assert len(fake.requests) == 3 and markers(workspace) == 0
    # The failing summary was asked once (with its one retry of a transient failure), not again
    # before the turn's next request, which was still over the budget.
    assert len(summariser.requests) == len(plays) and summariser.pending == 0
    (failed,) = failed_events(workspace)
    assert failed["category"] == category and failed["provider"] == "sum/cheap" and failed["cause"] == "budget"
    notices = [e for e in events if isinstance(e, NoticeEvent) and e.source == "compaction"]
    assert len(notices) == 1
    assert notices[0].text.startswith(f"compaction failed ({category}); the request goes out uncompacted")
    assert "sum/cheap" in notices[0].text


def test_a_request_too_long_for_the_server_whose_compaction_fails_stops_naming_both(
    workspace: Path, fake: FakeProvider, summariser: FakeProvider
) -> None:
    # The config claims a large context, so nothing compacts before the server refuses the request.
    fake.script(Reply("hi"), Fail(400, body=LLAMA_OVERFLOW))
    summariser.script(Fail(500), Fail(500))
    stop, _ = two_turns(workspace, config(fake, summariser, context=65536), BIG_PROMPT)
    assert stop.stop_reason == "provider_error"
    detail = stop.detail
    assert "the request exceeds the available context size" in detail
    assert "compacting the history failed: compaction by sum/cheap failed (server)" in detail
    assert "Nothing recorded is lost" in detail and "zuno resume " in detail
    assert "agent.compaction.model" in detail and "provider.fake.models.m1.context" in detail
    assert len(summariser.requests) == 2 and markers(workspace) == 0
    (failed,) = failed_events(workspace)
    assert failed["cause"] == "overflow" and failed["category"] == "server"


def test_a_compaction_that_failed_for_this_request_is_not_tried_again_when_the_server_refuses_it(
    workspace: Path, fake: FakeProvider, summariser: FakeProvider
) -> None:
    # Over the budget: the compaction fails (a closed connection, twice), the request goes out
    # uncompacted, the server refuses it as too long: the turn stops at once, naming the failure.
    fake.script(Reply("hi"), Fail(400, body=LLAMA_OVERFLOW))
    summariser.script(Drop(), Drop())
    stop, _ = two_turns(workspace, config(fake, summariser, context=4000), BIG_PROMPT)
    assert stop.stop_reason == "provider_error"
    assert "compaction by sum/cheap failed (connection)" in stop.detail
    assert "the request exceeds the available context size" in stop.detail
    assert len(summariser.requests) == 2 and summariser.pending == 0 and fake.pending == 0
    assert [e["cause"] for e in failed_events(workspace)] == ["budget"]


def test_zuno_run_stops_clearly_when_compaction_fails_and_resume_loses_nothing(
    workspace: Path, fake: FakeProvider, summariser: FakeProvider
) -> None:
    (workspace / "zuno.json").write_text(json.dumps(config(fake, summariser, context=65536)))
    fake.script(Reply("hi"))
    first = zuno_cli(workspace, "run", "--json", "hello")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session"]
    # The server finds the request too long; the summary server answers 200 with no event stream.
    fake.script(Fail(400, body=LLAMA_OVERFLOW))
    summariser.script(Fail(200, body=NOT_A_STREAM))
    p = zuno_cli(workspace, "run", "--json", "--session", sid, BIG_PROMPT)
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "provider_error"
    assert "compaction by sum/cheap failed (protocol)" in out["detail"]
    assert f"zuno resume {sid}" in out["detail"]
    assert "Traceback" not in p.stderr
    assert "zuno: stopped: provider_error" in p.stderr and "compaction by sum/cheap failed" in p.stderr
    # Nothing was lost: once the summary model answers, resuming compacts and finishes the work.
    fake.script(Fail(400, body=LLAMA_OVERFLOW), Reply("finally"))
    summariser.script(Reply("SUMMARY-OF-HELLO"))
    r = zuno_cli(workspace, "resume", sid, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["final_text"] == "finally"
    last = json.dumps(fake.requests[-1].body["messages"])
    assert "SUMMARY-OF-HELLO" in last and "BIG-PROMPT-7c1" in last
    assert markers(workspace) == 1

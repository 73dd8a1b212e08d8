"""Goal required input (sixteenth round): goal_request_input binds the observed Goal revision and
records the Goal pause and the session wait in one transaction; only the answer to exactly that
request resumes the Goal; the agent loop ends the turn after the request."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import zuno
from zuno.tools.state import goal_input

from conftest import zuno_cli
from fake_provider import Call, FakeProvider, Reply
from provider_help import make
from statehelp import call

CREATE = {"action": "create", "objective": "ship the service", "criteria": [{"text": "deployed"}]}
QUESTION = "Which database should it use: sqlite or postgres?"


def _db(workspace: Path) -> sqlite3.Connection:
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    db.row_factory = sqlite3.Row
    return db


def _requests(workspace: Path) -> list[dict[str, Any]]:
    db = _db(workspace)
    try:
        return [dict(r) for r in db.execute("SELECT * FROM goal_input_requests ORDER BY asked_at")]
    finally:
        db.close()


def _goal(workspace: Path, sid: str) -> dict[str, Any]:
    rt = zuno.Runtime(root=workspace)
    try:
        return rt.state(sid)["goal"]
    finally:
        rt.store.close()


async def _asked(workspace: Path, call_id: str = "call_ask") -> tuple[str, str]:
    """A session whose Goal asked for required input: (session id, request id)."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await call(s, "goal_update", CREATE)).outcome == "ok"
        rec = await call(s, "goal_request_input", {"expected_revision": 1, "question": QUESTION}, id=call_id)
        assert rec.outcome == "ok", rec.text
        return s.id, str(rec.metadata["waitingInput"])


async def test_a_request_pauses_the_goal_and_records_the_wait_together(workspace: Path) -> None:
    sid, rid = await _asked(workspace)
    assert rid.startswith("gi_")
    now = _goal(workspace, sid)
    assert now["revision"] == 2 and now["goal"]["status"] == "paused"
    assert now["goal"]["pause_reason"] == {"kind": "waiting_input", "detail": QUESTION, "request": rid}
    (row,) = _requests(workspace)
    assert (row["id"], row["session_id"], row["status"], row["question"]) == (rid, sid, "pending", QUESTION)
    assert (row["goal_revision"], row["paused_revision"], row["call_id"]) == (1, 2, "call_ask")
    # zuno goal shows what the Goal waits for, and how to answer exactly it
    shown = zuno_cli(workspace, "goal", "--session", sid)
    assert shown.returncode == 0, shown
    assert f"required input {rid} (asked " in shown.stdout and QUESTION in shown.stdout
    assert f"--request {rid}" in shown.stdout
    got = json.loads(zuno_cli(workspace, "goal", "--session", sid, "--json").stdout)
    assert got["input_request"]["id"] == rid and got["input_request"]["status"] == "pending"
    assert got["input_request"]["question"] == QUESTION and got["input_request"]["goal_revision"] == 1


async def test_the_pause_is_not_written_without_the_wait(workspace: Path) -> None:
    """One transaction: when the wait cannot be recorded, the Goal is not paused either."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await call(s, "goal_update", CREATE)).outcome == "ok"
        rt.store.execute(
            "CREATE TRIGGER no_waits BEFORE INSERT ON goal_input_requests BEGIN SELECT RAISE(ABORT, 'no waits'); END"
        )
        rec = await call(s, "goal_request_input", {"expected_revision": 1, "question": QUESTION})
        assert rec.outcome != "ok"
        sid = s.id
    now = _goal(workspace, sid)
    assert now["revision"] == 1 and now["goal"]["status"] == "active"
    assert _requests(workspace) == []


async def test_a_stale_revision_is_refused_and_nothing_is_recorded(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await call(s, "goal_request_input", {"expected_revision": 1, "question": QUESTION})).outcome != "ok"
        assert (await call(s, "goal_update", CREATE)).outcome == "ok"
        await call(s, "goal_update", {"action": "add_criteria", "expected_revision": 1, "criteria": [{"text": "x"}]})
        rec = await call(s, "goal_request_input", {"expected_revision": 1, "question": QUESTION})
        assert rec.outcome == "error" and "[refused: StaleRevision]" in rec.text and "revision 2" in rec.text
        sid = s.id
    now = _goal(workspace, sid)
    assert now["revision"] == 2 and now["goal"]["status"] == "active"
    assert _requests(workspace) == []


async def test_a_replayed_delivery_returns_the_same_request(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await call(s, "goal_update", CREATE)).outcome == "ok"
        args = {"expected_revision": 1, "question": QUESTION}
        first = await call(s, "goal_request_input", args, id="call_same")
        again = await call(s, "goal_request_input", args, id="call_same")
        assert first.outcome == again.outcome == "ok", again.text
        assert again.metadata["waitingInput"] == first.metadata["waitingInput"] and again.metadata["replayed"]
        # a new call while it waits: refused, naming the pending request (no second request)
        other = await call(s, "goal_request_input", {"expected_revision": 2, "question": "another?"})
        assert other.outcome == "error" and "GoalNotActive" in other.text
        assert first.metadata["waitingInput"] in other.text
        sid = s.id
    assert [r["id"] for r in _requests(workspace)] == [first.metadata["waitingInput"]]
    assert _goal(workspace, sid)["revision"] == 2


async def test_nothing_but_the_answer_resumes_it(workspace: Path) -> None:
    sid, rid = await _asked(workspace)
    p = zuno_cli(workspace, "goal", "resume", "--session", sid)  # a plain resume
    assert p.returncode == 1 and "waiting for your input" in p.stderr, p
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "postgres", "--request", "gi_other")
    assert p.returncode == 1 and "no required-input request gi_other" in p.stderr, p
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        # the model: no resume action, no pause over the wait, no new Goal over it
        rec = await call(s, "goal_update", {"action": "resume", "expected_revision": 2})
        assert rec.outcome != "ok"
        rec = await call(s, "goal_update", {"action": "pause", "expected_revision": 2, "reason": {"kind": "blocked"}})
        assert rec.outcome == "error" and "InvalidTransition" in rec.text
        rec = await call(s, "goal_update", {**CREATE, "expected_revision": 2})
        assert rec.outcome == "error" and "GoalPaused" in rec.text
        # the state layer itself: an answer naming another request is refused
        from zuno.tools.state import docstore, goal

        try:
            goal.resume_goal(rt.store, sid, 2, "host-x", "postgres", "gi_someother")
        except docstore.StateRefusal as r:
            assert r.kind == "WrongRequest" and rid in r.message
        else:
            raise AssertionError("an answer to another request resumed the Goal")
    now = _goal(workspace, sid)
    assert now["revision"] == 2 and now["goal"]["status"] == "paused"
    assert [r["status"] for r in _requests(workspace)] == ["pending"]


async def test_the_answer_resumes_it_once_and_the_model_reads_it(workspace: Path) -> None:
    sid, rid = await _asked(workspace)
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "postgres 16", "--request", rid, "--json")
    assert p.returncode == 0, p
    out = json.loads(p.stdout)
    assert out["resumed"] and out["request"] == rid and f"Goal resumed with your answer to {rid}" in out["message"]
    now = _goal(workspace, sid)
    assert now["revision"] == 3 and now["goal"]["status"] == "active"
    assert now["goal"]["input_answer"] == {"asked": QUESTION, "answer": "postgres 16", "request": rid}
    (row,) = _requests(workspace)
    assert (row["status"], row["answer"], row["closed_revision"]) == ("answered", "postgres 16", 3)
    # a second answer: refused, naming the request, nothing changed
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "sqlite", "--request", rid)
    assert p.returncode == 1 and f"request {rid} was already answered ('postgres 16')" in p.stderr, p
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "sqlite")
    assert p.returncode == 1 and f"request {rid} was already answered" in p.stderr, p
    assert _goal(workspace, sid)["revision"] == 3 and _requests(workspace)[0]["answer"] == "postgres 16"
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        text = (await call(s, "goal_get")).text
        assert text.count("postgres 16") == 1 and rid in text
        from zuno.tools.state.projection import goal_section

        section = goal_section(rt.store, sid)
        assert section is not None and section.text.count("postgres 16") == 1 and section.goal_active
        assert goal_input.pending_request(rt.store, sid) is None


async def test_abandoning_the_goal_cancels_the_wait(workspace: Path) -> None:
    sid, rid = await _asked(workspace)
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        rec = await call(s, "goal_update", {"action": "abandon", "expected_revision": 2, "reason": "dropped"})
        assert rec.outcome == "ok", rec.text
    (row,) = _requests(workspace)
    assert (row["status"], row["answer"]) == ("cancelled", None)
    p = zuno_cli(workspace, "goal", "resume", "--session", sid, "--input", "postgres", "--request", rid)
    assert p.returncode == 1 and "was cancelled" in p.stderr, p


async def test_the_agent_loop_ends_the_turn_after_the_request(workspace: Path) -> None:
    from zuno.agent.api import WaitingForInput

    ask = json.dumps({"expected_revision": 1, "question": QUESTION})
    with FakeProvider() as fake:
        fake.script(
            Reply(calls=[Call("goal_update", json.dumps(CREATE))]),
            Reply(calls=[Call("goal_request_input", ask)]),
            Reply(text="guessing sqlite and going on"),  # never asked for: the turn ended
        )
        provider = make(fake, "openai-chat")
        async with zuno.Runtime(root=workspace) as rt, rt.agent(provider=provider, mode="goal") as agent:
            result = await agent.run("ship it")
            assert result.stop_reason == "waiting_input", (result.stop_reason, result.detail)
            assert "gi_" in result.detail and "zuno goal resume" in result.detail
            assert len(fake.requests) == 2 and fake.pending == 1
            system = fake.requests[0].body["messages"][0]
            assert system["role"] == "system" and "call goal_request_input" in str(system["content"])
            # a resume without a prompt does not bypass the wait
            try:
                await agent.run()
            except WaitingForInput as e:
                assert "waits for your input" in str(e) and "--input" in str(e)
            else:
                raise AssertionError("a resume ran while the Goal waited for input")
            assert len(fake.requests) == 2
            sid = agent.id
    now = _goal(workspace, sid)
    assert now["goal"]["status"] == "paused" and now["goal"]["pause_reason"]["kind"] == "waiting_input"
    (row,) = _requests(workspace)
    assert row["status"] == "pending" and row["session_id"] == sid
    # zuno resume without a prompt: refused before any model is asked (the port is closed)
    provider = {"api": "openai-chat", "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "k"},
                "models": {"m1": {"context": 65536, "output": 2048}}}
    (workspace / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": provider}}))
    p = zuno_cli(workspace, "resume", sid)
    assert p.returncode == 2 and f"waits for your input (required-input request {row['id']}" in p.stderr, p


async def test_only_the_goal_owner_asks(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await call(s, "goal_update", CREATE)).outcome == "ok"
        sid = s.id
    child = {"agent": {"name": "reviewer"}}
    async with zuno.Runtime(root=workspace, config_overrides=child) as rt, rt.session(sid) as s:
        rec = await call(s, "goal_request_input", {"expected_revision": 1, "question": QUESTION})
        assert rec.outcome == "error" and "NotGoalOwner" in rec.text and "'main'" not in rec.text
    assert _goal(workspace, sid)["goal"]["status"] == "active" and _requests(workspace) == []

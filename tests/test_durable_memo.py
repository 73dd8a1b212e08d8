"""What the durable path keeps in memory instead of asking the database (a session has one driver
process): the attempt numbers of its calls, its receipts' generations, that no notice is pending,
its step count. Each is checked against what the database says, across a fresh process's view,
and with the writes that must make it look again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits
from zuno.admission import lone_surrogate, measure_call, plain_call
from zuno.store import Store
from zuno.store.calls import args_digest, dumps, identity


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read", {"path": "a.txt"}),
        ("read", {"limit": 5, "offset": 2, "path": "a.txt"}),  # keys in order
        ("read", {"path": "a.txt", "offset": 2}),  # keys out of order
        ("grep", {"pattern": "x", "opts": {"b": 1, "a": 2}}),  # nested
        ("write", {"content": "é\n", "path": "ü.txt"}),  # not ASCII
        ("write", {"content": "\ud800", "path": "a"}),  # a lone surrogate
        ("mcp__srv__do-it", {"a": 1}),  # a name that is not an identifier
        ("read", {"a": [1, {"z": 1, "y": 2}]}),
        ("read", "not an object"),
        ("read", {}),
    ],
)
def test_one_encoding_gives_the_column_and_the_digest_of_the_old_two(name: str, arguments: Any) -> None:
    assert identity(name, arguments) == (dumps(arguments), args_digest(name, arguments))


@pytest.mark.parametrize(
    "call",
    [
        {"name": "read", "arguments": {"path": "a.txt", "offset": 3, "x": None, "y": True, "z": 1.5}},
        {"name": "read", "arguments": {"path": "é"}},
        {"name": "read", "arguments": {"path": "\ud800"}},
        {"name": "read", "arguments": {"nested": {"deeper": 1}}},
        {"name": "read", "arguments": [1, 2]},
        {"name": "read", "arguments": '{"path": "a"}'},
        {"name": "write", "arguments": {"content": "x" * (limits.CALL_MAX_BYTES + 1)}},
        ["not", "an", "object"],
    ],
)
def test_a_plain_call_is_one_the_full_measure_admits_unchanged(call: Any) -> None:
    if plain_call(call):
        assert measure_call(call) is None
        assert isinstance(call, dict) and lone_surrogate(call) is None
        args = call["arguments"]
        assert not isinstance(args, dict) or all(not isinstance(v, dict | list) for v in args.values())


def test_the_largest_plain_call_is_not_larger_than_the_limit() -> None:
    at = {"name": "w", "arguments": {"c": "x" * (limits.CALL_MAX_BYTES - 64)}}
    over = {"name": "w", "arguments": {"c": "x" * limits.CALL_MAX_BYTES}}
    assert plain_call(at) and measure_call(at) is None
    assert not plain_call(over) and measure_call(over) is not None


async def test_attempts_count_on_across_a_new_process_view(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    read = [{"name": "read", "arguments": {"path": "a.txt"}}]
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        for _ in range(3):
            await s.step(read)
        await s.step([{"name": "read", "arguments": {"path": "a.txt", "offset": 1}}])
        sid = s.id
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        await s.step(read)
        rows = rt.store.calls(sid)
    assert [r.attempt for r in rows] == [1, 2, 3, 1, 4]


class _Alternating:
    """Approves, declines, approves...: a refused call with the same arguments lands between two runs."""

    def __init__(self) -> None:
        self.n = 0

    async def approve(self, request: Any) -> bool | None:
        self.n += 1
        return self.n % 2 == 1


async def test_a_refused_call_counts_in_the_remembered_attempts_as_in_the_database(workspace: Path) -> None:
    (workspace / "zuno.json").write_text('{"permission": {"strict": true}}')
    write = [{"name": "write", "arguments": {"path": "b.txt", "content": "x\n"}}]
    async with zuno.Runtime(root=workspace, approver=_Alternating()) as rt, rt.session() as s:
        outcomes = [(await s.step(write)).results[0].outcome for _ in range(3)]
        sid = s.id
    assert outcomes == ["ok", "blocked", "ok"]
    async with zuno.Runtime(root=workspace, approver=_Alternating()) as rt, rt.session(sid) as s:
        await s.step(write)
        rows = rt.store.calls(sid)
    # 1 + the earlier calls with the same tool and arguments, the refused one included, whichever
    # process numbered them
    assert [r.attempt for r in rows if r.outcome != "blocked"] == [1, 3, 4]


async def test_receipt_generations_follow_the_database_after_a_drop(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    read = [{"name": "read", "arguments": {"path": "a.txt"}}]
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await s.step(read)
        await s.step(read)
        key = str((workspace / "a.txt").resolve())
        assert rt.store.read_receipt(s.id, key)["generation"] == 2
        rt.store.drop_read_receipt(s.id, key)
        await s.step(read)
        assert rt.store.query("SELECT generation FROM read_receipts WHERE session_id = ?", (s.id,))[0][0] == 1
        sid = s.id
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        await s.step(read)
        assert rt.store.read_receipt(sid, key)["generation"] == 2


async def test_a_notice_written_after_a_look_found_none_is_delivered(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await s.step([])).notices == []
        assert not rt.store.notices_pending(s.id)
        rt.store.add_notice(s.id, "test", "one")
        assert rt.store.notices_pending(s.id)
        assert [n["text"] for n in (await s.step([])).notices] == ["one"]
        assert (await s.step([])).notices == []
        assert not rt.store.notices_pending(s.id)
        seen: list[str] = []
        rt.store._db.set_trace_callback(seen.append)
        assert not rt.store.notices_pending(s.id)  # remembered: no query
        rt.store._db.set_trace_callback(None)
        assert seen == []
        # A tool family's own transaction (a job's completion) may write a notice: it is looked for.
        with rt.store.transaction() as db:
            db.execute(
                "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, 'job', 'two', '{}', 0)",
                (s.id,),
            )
        assert [n["text"] for n in (await s.step([])).notices] == ["two"]
        rt.store.execute(
            "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, 'job', 'three', '{}', 0)",
            (s.id,),
        )
        assert [n["text"] for n in (await s.step([])).notices] == ["three"]


def test_steps_are_numbered_from_the_steps_rows_when_the_driver_died(tmp_path: Path) -> None:
    db = tmp_path / "zuno.db"
    a = Store(db)
    sid = a.ensure_session("ses_x", "/", "zuno")
    a.acquire_session(sid)
    for _ in range(3):
        a.end_step(sid, a.begin_step(sid))
    # The driver "dies" holding the session: sessions.last_step was not brought up to date.
    b = Store(db)
    assert b.query("SELECT last_step FROM sessions WHERE id = ?", (sid,))[0][0] == 0
    assert b.list_sessions()[0]["last_step"] == 3
    assert b.begin_step(sid) == 4
    b.close()
    a.release_session(sid)  # a clean release writes the count
    assert a.query("SELECT last_step FROM sessions WHERE id = ?", (sid,))[0][0] == 4
    a.close()


CANCEL_EXT = '''
import asyncio, zuno


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def swallow(ms: int) -> zuno.ToolOutput:
    """Wait; a cancellation is taken back by the tool itself and reported as its result."""
    try:
        await asyncio.sleep(ms / 1000)
    except asyncio.CancelledError:
        asyncio.current_task().uncancel()
        return zuno.ToolOutput(text="stopped", outcome=zuno.Outcome.error, cancelled=True)
    return zuno.ToolOutput(text="done")


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def claims_cancelled() -> zuno.ToolOutput:
    """Report cancelled without any cancellation (a tool's own word)."""
    return zuno.ToolOutput(text="said so", outcome=zuno.Outcome.error, cancelled=True)
'''


def _cancel_runtime(root: Path) -> zuno.Runtime:
    (root / "cancel_ext.py").write_text(CANCEL_EXT)
    return zuno.Runtime(root=root, config_overrides={"extensions": ["cancel_ext.py"]})


async def test_a_cancellation_from_outside_that_the_tool_takes_back_still_cancels_the_step(workspace: Path) -> None:
    """The tool runs in the step's own task: when it takes back the caller's cancellation itself,
    the step still records the call and then lets the cancellation through."""
    async with _cancel_runtime(workspace) as rt, rt.session() as s:
        task = asyncio.create_task(s.step([{"name": "swallow", "arguments": {"ms": 5000}}]))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        rows = rt.store.calls(s.id)
    assert [(r.name, r.state, r.cancelled) for r in rows] == [("swallow", "settled", True)]


async def test_the_steps_own_cancel_leaves_the_callers_task_uncancelled(workspace: Path) -> None:
    async with _cancel_runtime(workspace) as rt, rt.session() as s:

        async def run() -> tuple[Any, int]:
            res = await s.step([{"name": "swallow", "arguments": {"ms": 5000}}])
            await asyncio.sleep(0)  # a pending cancellation would land here
            task = asyncio.current_task()
            assert task is not None
            return res, task.cancelling()

        task = asyncio.create_task(run())
        await asyncio.sleep(0.2)
        s.cancel()
        res, pending = await task
    assert res.results[0].cancelled and pending == 0


async def test_a_tool_that_says_cancelled_unasked_does_not_cancel_the_step(workspace: Path) -> None:
    async with _cancel_runtime(workspace) as rt, rt.session() as s:
        res = await s.step([{"name": "claims_cancelled", "arguments": {}}])
        again = await s.step([{"name": "claims_cancelled", "arguments": {}}])
    assert res.results[0].cancelled and again.results[0].text == "said so"


def test_reserved_request_ids_and_call_seqs_never_collide_across_processes(tmp_path: Path) -> None:
    # Two drivers of one database (two processes' stores) reserve their numbers in blocks; rows
    # written later with those numbers never collide, with each other nor with a plain insert.
    import subprocess
    import sys

    db = tmp_path / "z.db"
    a = Store(db)
    sid = a.ensure_session(None, str(tmp_path), "zuno")
    mine = [a.next_request_id() for _ in range(3)]
    seqs = [a.next_call_seq() for _ in range(3)]
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from zuno.store import Store; s = Store(pathlib.Path(sys.argv[1]));"
            " print(s.next_request_id(), s.next_call_seq())",
            str(db),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    their_request, their_seq = map(int, other.stdout.split())
    assert their_request not in mine and their_request > max(mine)
    assert their_seq not in seqs and their_seq > max(seqs)
    insert = (
        "INSERT INTO agent_requests (id, session_id, turn, purpose, model, system_digest, context_digest,"
        " message_count, tool_count, estimated_tokens, started_at, status)"
        " VALUES (?, ?, 1, 'turn', 'm', 'd', 'd', 0, 0, 0, 0, 'sent')"
    )
    with a.transaction() as conn:
        conn.execute(insert, (their_request, sid))
        plain = conn.execute(insert.replace("(id, ", "(").replace("(?, ?, 1", "(?, 1"), (sid,)).lastrowid
        for n in mine:
            conn.execute(insert, (n, sid))
    assert plain not in mine and plain != their_request
    assert a.query("SELECT COUNT(*) FROM agent_requests")[0][0] == 5


def test_a_database_of_the_old_schema_gets_the_partial_indexes(tmp_path: Path) -> None:
    # A database made before 0003 has an index over every item's kind; opened now, it keeps only
    # the compaction markers' partial index, which the lookups by kind use.
    import sqlite3

    from zuno.store.schema import MIGRATIONS

    db_path = tmp_path / "old.db"
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for name, sql in MIGRATIONS[:2]:
        for statement in (s.strip() for s in sql.split(";")):
            if statement:
                db.execute(statement)
        db.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    db.commit()
    db.close()
    s = Store(db_path)
    names = {r[0] for r in s.query("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "agent_items_compactions" in names and "agent_items_by_kind" not in names
    plan = s.query(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM agent_items WHERE session_id = 'x' AND kind = 'compaction'"
    )
    assert "agent_items_compactions" in plan[0][3]
    assert "calls_started" in names and "calls_unsettled" not in names
    plan = s.query("EXPLAIN QUERY PLAN SELECT * FROM calls WHERE session_id = 'x' AND state = 'started' ORDER BY seq")
    assert "calls_started" in plan[0][3]

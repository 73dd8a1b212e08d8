"""A caller's own writes riding in the transaction that settles a step's last call
(``Session.step(also=StepWrites(...))``): committed with it, or undone alone when they fail."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import zuno
from zuno.records import CallRecord, StepWrites


def _notes(root: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(root / ".zuno" / "zuno.db")  # another connection: only what is committed
    try:
        return db.execute("SELECT kind, text FROM notices WHERE kind LIKE 'test-%' ORDER BY seq").fetchall()
    finally:
        db.close()


def test_the_writes_commit_with_the_last_settlement_and_see_every_record(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    seen: dict[str, Any] = {}

    def write(db: Any, step: int, records: list[CallRecord]) -> None:
        seen["step"], seen["records"] = step, [(r.call_id, r.seq) for r in records]
        seen["committed_during"] = _notes(workspace)
        db.execute(
            "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, 'test-a', ?, '{}', 0)",
            (session.id, ",".join(r.call_id for r in records)),
        )

    async def go() -> Any:
        nonlocal session
        async with zuno.Runtime(root=workspace) as rt:
            session = rt.session(None)
            await session.open()
            also = StepWrites(write, lambda: seen.setdefault("committed", True))
            result = await session.step(
                [
                    {"id": "r1", "name": "read", "arguments": {"path": "a.txt"}},
                    {"id": "w1", "name": "write", "arguments": {"path": "b.txt", "content": "b\n"}},
                    {"id": "r2", "name": "read", "arguments": {"path": "b.txt"}},
                    {"id": "x1", "name": "no_such_tool", "arguments": {}},
                ],
                also=also,
            )
            return result, also, rt.store.calls(session.id)

    session: Any = None
    result, also, rows = asyncio.run(go())
    assert also.done and also.error is None and seen["committed"]
    assert seen["step"] == result.step
    by_id = {r.call_id: r.seq for r in rows}
    assert seen["records"] == [(c, by_id[c]) for c in ("r1", "w1", "r2", "x1")]  # all, in call order, seqs set
    assert seen["committed_during"] == []  # inside the transaction: not yet visible to others
    assert _notes(workspace) == [("test-a", "r1,w1,r2,x1")]


def test_a_failing_write_is_undone_alone_and_the_step_settles(workspace: Path) -> None:
    def write(db: Any, step: int, records: list[CallRecord]) -> None:
        db.execute(
            "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, 'test-b', 'x', '{}', 0)",
            (records[0].call_id and session.id,),
        )
        raise RuntimeError("the caller's own bug")

    async def go() -> Any:
        nonlocal session
        async with zuno.Runtime(root=workspace) as rt:
            session = rt.session(None)
            await session.open()
            also = StepWrites(write, lambda: None)
            result = await session.step([{"id": "g1", "name": "glob", "arguments": {"pattern": "*"}}], also=also)
            return result, also, rt.store.calls(session.id)

    session: Any = None
    result, also, rows = asyncio.run(go())
    assert not also.done and isinstance(also.error, RuntimeError)
    assert [r.state for r in rows] == ["settled"] and str(result.results[0].outcome) == "ok"
    assert _notes(workspace) == []  # the caller's insert was rolled back with its savepoint

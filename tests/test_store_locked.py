"""A store another program keeps locked is named as locked (what to do: let it finish, or --db),
not as a file that "cannot be used as a SQLite database"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import zuno
from zuno.store import connection
from zuno.store.paths import StoreUnusable


async def test_a_store_held_locked_by_another_connection_is_said_to_be_locked(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "a.txt").write_text("hi\n")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert (await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])).results[0].outcome == "ok"
        db_path = rt.db_path
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program's transaction, left open
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 300)
    try:
        with pytest.raises(StoreUnusable) as caught:
            connection.open_db(db_path, [], readonly=False)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(caught.value)
    assert "is locked by another process" in message and "--db" in message, message
    assert "cannot be used as a SQLite database" not in message
    connection.open_db(db_path, [], readonly=False).close()  # free again: it opens

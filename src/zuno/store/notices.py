"""A session's notices: queued for its next step, handed to one step, marked delivered when that
step ends (so a step that dies before it ends delivers them again with the next one: a notice may
be seen twice, never lost).

A session this process drives gets its notices written through this store only (a notice is the
driver's: recovery, a job's completion, a server that failed), so once a look found none, the next
step needs no query until something is written that may be one (``written``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection
from typing import Any

from zuno.store.calls import dumps
from zuno.store.transaction import Transactions

DELIVER_NOTICES = "UPDATE notices SET delivered_step = ? WHERE session_id = ? AND delivered_step IS NULL AND seq <= ?"
PENDING_NOTICES = "SELECT * FROM notices WHERE session_id = ? AND delivered_step IS NULL AND seq > ? ORDER BY seq"
INSERT_NOTICE = "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, ?, ?, ?, ?)"
ANY_PENDING = "SELECT 1 FROM notices WHERE session_id = ? AND delivered_step IS NULL LIMIT 1"


class Notices:
    def __init__(self, tx: Transactions) -> None:
        self._tx = tx
        self._lock = tx.lock
        # Sessions with no notice pending as of the last look, and none written since.
        self.none_pending: set[str] = set()
        # (session, step) -> the highest notice seq handed to that step, delivered when it ends.
        self.handed: dict[tuple[str, int], int] = {}

    def written(self) -> None:
        """Something was written that may be a notice (any write of a tool family): look again."""
        self.none_pending.clear()

    def add(self, session_id: str, kind: str, text: str, data: dict[str, Any] | None = None) -> int:
        with self._lock:
            self.none_pending.clear()
            cur = self._tx.execute(INSERT_NOTICE, (session_id, kind, text, dumps(data or {}), time.time()))
        return int(cur.lastrowid or 0)

    def take(self, session_id: str, step: int, running: Collection[int] = ()) -> list[dict[str, Any]]:
        """The pending notices of the session, for this step (delivered when it ends: ``deliver``).
        ``running``: the other steps of the session still in progress in this process, whose
        notices are theirs."""
        with self._lock:  # atomic with in_flight() readers (a completion claimed exactly once)
            if session_id in self.none_pending:
                return []
            # A notice already handed to another step of this session that is still running (steps run
            # concurrently when an MCP client sends requests together) is that step's: not handed twice.
            floor = max((self.handed.get((session_id, m), 0) for m in running), default=0)
            rows = self._tx.db.execute(PENDING_NOTICES, (session_id, floor)).fetchall()
            if rows:
                self.handed[(session_id, step)] = rows[-1]["seq"]
            elif not floor and session_id in self._tx.held:
                self.none_pending.add(session_id)
        return [{"kind": r["kind"], "text": r["text"], **json.loads(r["data"])} for r in rows]

    def pending(self, session_id: str) -> bool:
        """Is a notice of the session waiting for a step? (No query when the last look found none
        and nothing was written since.)"""
        with self._lock:
            if session_id in self.none_pending:
                return False
            return self._tx.db.execute(ANY_PENDING, (session_id,)).fetchone() is not None

    def in_flight(self, session_id: str) -> int:
        """The highest notice seq already handed to a step of this session that has not ended yet
        (0 if none)."""
        with self._lock:
            return max((seq for (sid, _n), seq in self.handed.items() if sid == session_id), default=0)

    def deliver(self, db: sqlite3.Connection, session_id: str, step: int) -> None:
        """In the transaction that ends ``step``: mark the notices handed to it delivered."""
        upto = self.handed.pop((session_id, step), None)
        if upto is not None:
            db.execute(DELIVER_NOTICES, (step, session_id, upto))

    def forget(self, session_id: str) -> None:
        self.none_pending.discard(session_id)

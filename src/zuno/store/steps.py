"""A session's steps: numbered, begun and ended.

A step's row and its step-started event are written with the step's first durable fact, in that
fact's transaction (one commit less per step): the steps are a rider of the store's transactions
(``zuno.store.transaction``), and a step that never wrote anything left nothing to record. Safe
because a session has one driver process; steps of that process may overlap.

``sessions.last_step`` is brought up to date when the process that drove the session lets it go
(not with every step: one row less per commit); the steps rows are the truth.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from typing import Any

from zuno.store.calls import dumps
from zuno.store.notices import Notices
from zuno.store.transaction import Events, Transactions

UPDATE_LAST_STEP = "UPDATE sessions SET last_step = MAX(last_step, ?) WHERE id = ?"
NEXT_STEP = (
    "SELECT MAX(s.last_step, COALESCE((SELECT MAX(t.n) FROM steps t WHERE t.session_id = s.id), 0)) + 1"
    " FROM sessions s WHERE s.id = ?"
)
INSERT_STEP = "INSERT INTO steps (session_id, n, started_at, ended_at) VALUES (?, ?, ?, ?)"
END_STEP = "UPDATE steps SET ended_at = ? WHERE session_id = ? AND n = ?"


class Steps:
    def __init__(self, tx: Transactions, notices: Notices) -> None:
        self._tx = tx
        self._lock = tx.lock
        self._notices = notices
        # session -> (n, step-started data, started at): begun, their rows not written yet.
        self.pending: dict[str, tuple[int, dict[str, Any] | None, float]] = {}
        self._last: dict[str, int] = {}  # session -> the last step this process numbered

    def begin(self, session_id: str, event: dict[str, Any] | None = None) -> int:
        """Number the next step of the session (each begin flushes the one still pending)."""
        with self._lock:
            last = self._last.get(session_id)
            if last is None:
                (n,) = self._tx.db.execute(NEXT_STEP, (session_id,)).fetchone()
            else:  # this process drives the session: it numbered its last step itself
                n = last + 1
            pending = self.pending.get(session_id)
            if pending is not None:  # a previous step of this session wrote nothing: it still takes its number
                n = max(n, pending[0] + 1)
                with self._tx.begin():
                    pass
            self.pending[session_id] = (int(n), event, time.time())
            self._last[session_id] = int(n)
        return int(n)

    def flush(self, db: sqlite3.Connection, events: Events, ending: tuple[str, int] | None) -> None:
        """Write the rows of the steps that began since the last commit; a step that also ends in
        this transaction (``ending``) is written ended, in one row."""
        for session_id, (n, event, started_at) in list(self.pending.items()):
            ended = time.time() if ending == (session_id, n) else None
            if session_id not in self._tx.held:
                db.execute(UPDATE_LAST_STEP, (n, session_id))
            db.execute(INSERT_STEP, (session_id, n, started_at, ended))
            events.append((session_id, n, None, None, "step-started", dumps(event or {}), started_at))

    def committed(self) -> None:
        self.pending.clear()

    def ending(self, end_step: tuple[str, int]) -> tuple[str, int] | None:
        """``end_step`` if that step's row is still pending (it is then written ended), else None."""
        pending = self.pending.get(end_step[0])
        return end_step if pending is not None and pending[0] == end_step[1] else None

    def end(self, session_id: str, n: int) -> None:
        with self._tx.begin() as (db, events):
            self.write_end(db, events, session_id, n)

    def write_end(self, db: sqlite3.Connection, events: Events, session_id: str, n: int, row: bool = True) -> None:
        """In a transaction: the end of step ``n`` (``row``: its row is written already, so update
        it), the notices handed to it delivered, and its step-ended event."""
        now = time.time()
        if row:
            db.execute(END_STEP, (now, session_id, n))
        self._notices.deliver(db, session_id, n)
        events.append((session_id, n, None, None, "step-ended", "{}", now))

    def release(self, session_id: str) -> None:
        """The session is let go by this process: bring ``sessions.last_step`` up to date."""
        last = self._last.pop(session_id, None)
        if last is not None and session_id in self._tx.held:
            with contextlib.suppress(sqlite3.Error):
                self._tx.execute(UPDATE_LAST_STEP, (last, session_id))

"""The writes of durable calls: the intents of Never calls before they start, the settlements of a
step's calls (with the end of the step and the caller's own writes, in one transaction), and the
settling of a call found unsettled by recovery. The rows themselves are made by ``CallEntry``
(``zuno.store.calls``); this module numbers the attempts and writes the rows in batches.

The attempt number of a call is 1 + the earlier calls of its session with the same tool and
arguments; a session this process drives keeps those counts in memory (it is their only writer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zuno.store.calls import (
    COUNT_PRIOR,
    INSERT_EVENT,
    INSERT_INTENT,
    INSERT_SETTLED,
    UPDATE_SETTLED,
    CallEntry,
    as_text,
    dumps,
)
from zuno.store.numbers import Numbers
from zuno.store.steps import Steps
from zuno.store.transaction import MEMO_ENTRIES, Transactions, write_events

if TYPE_CHECKING:
    import sqlite3

    from zuno.records import CallRecord, StepWrites

# The synchronous level of the transaction that commits Never calls' intents: FULL fsyncs the WAL
# at that commit, so an intent survives a power loss, not only a crash of the process.
INTENT_SYNCHRONOUS = "FULL"

CALL_PLACE = "SELECT session_id, step, call_id FROM calls WHERE seq = ?"

Counts = dict[tuple[str, str, str], int]  # (session, tool, arguments digest) -> attempt


class CallWrites:
    def __init__(self, tx: Transactions, steps: Steps, numbers: Numbers) -> None:
        self._tx = tx
        self._lock = tx.lock
        self._steps = steps
        self._numbers = numbers
        self.intent_synchronous = INTENT_SYNCHRONOUS
        self._attempts: Counts = {}  # of the sessions this process drives: the last attempt

    def write_intents(self, entries: list[CallEntry]) -> None:
        """Commit the intent rows (and call-started events) of these Never calls in one transaction,
        with ``synchronous`` at ``intent_synchronous`` (FULL) for that commit: each entry's attempt
        number is set. Called before any of them starts."""
        with self._lock:
            for e in entries:
                if not e.seq:
                    e.seq = self._numbers.next_call_seq()
            full = self.intent_synchronous != "NORMAL"
            if full:
                self._tx.db.execute(f"PRAGMA synchronous={self.intent_synchronous}")
            try:
                with self._tx.begin() as (db, events):
                    counts = self._number_attempts(db, entries)
                    now = time.time()
                    rows = [e.intent_row(now) for e in entries]
                    if len(rows) == 1:
                        db.execute(INSERT_INTENT, rows[0])
                    else:
                        db.executemany(INSERT_INTENT, rows)
                    events.extend(e.started_event(now) for e in entries)
            finally:
                if full:
                    self._tx.db.execute("PRAGMA synchronous=NORMAL")
            self._remember_attempts(counts)
            for e in entries:
                e.intent_written = True

    def write_settlements(
        self,
        entries: list[CallEntry],
        end_step: tuple[str, int] | None = None,
        also: StepWrites | None = None,
        records: Callable[[], tuple[int, list[CallRecord]]] | None = None,
    ) -> None:
        """Write these calls' results (in the given order) and, with ``end_step``, the end of that
        step, in one transaction: one statement for the rows inserted settled, one for the intent
        rows settled, one for all the events. An entry without an intent row is inserted settled.
        ``also``: the caller's writes that ride in the same transaction (see ``StepWrites``), given
        ``records()`` once every entry has its seq."""
        with self._lock:
            for e in entries:
                if not e.seq:
                    e.seq = self._numbers.next_call_seq()
            ending = self._steps.ending(end_step) if end_step is not None else None
            with self._tx.begin(ending) as (db, events):
                ran = [e for e in entries if e.kind == "ran" and not e.intent_written]
                counts = self._number_attempts(db, ran) if ran else {}
                now = time.time()
                inserted = [e.settled_row(now) for e in entries if not e.intent_written]
                updated = [e.update_row() for e in entries if e.intent_written]
                for sql, rows in ((INSERT_SETTLED, inserted), (UPDATE_SETTLED, updated)):
                    if len(rows) == 1:
                        db.execute(sql, rows[0])
                    elif rows:
                        db.executemany(sql, rows)
                for e in entries:
                    if not e.intent_written and e.kind == "ran":
                        events.append(e.started_event(now))
                    ev = e.settled_event(now)
                    if ev is not None:
                        events.append(ev)
                if end_step is not None:
                    self._steps.write_end(db, events, end_step[0], end_step[1], row=ending is None)
                if also is not None and records is not None:
                    _also(db, also, records)
            self._remember_attempts(counts)
            if also is not None and also.error is None and records is not None:
                also.done = True
                also.committed()
            for e in entries:  # a refused call's row counts too, as COUNT_PRIOR counts it
                if e.kind == "settled" and not e.intent_written:
                    key = (e.session_id, e.name, e.identity()[1])
                    if key in self._attempts:
                        self._attempts[key] += 1

    def settle_call(
        self,
        seq: int,
        *,
        outcome: str,
        block_kind: str | None,
        cancelled: bool,
        text: str,
        metadata: dict[str, Any],
        started_at: float | None,
        ended_at: float | None,
        event: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """Write a call's result, and (optionally) its event, in one transaction."""
        with self._tx.begin() as (db, events):
            write_events(db, events)
            db.execute(
                UPDATE_SETTLED,
                (outcome, block_kind, int(cancelled), as_text(text), dumps(metadata), started_at, ended_at, seq),
            )
            if event is not None:
                session_id, step, call_id = db.execute(CALL_PLACE, (seq,)).fetchone()
                db.execute(INSERT_EVENT, (session_id, step, seq, call_id, event[0], dumps(event[1] or {}), time.time()))

    def _number_attempts(self, db: sqlite3.Connection, entries: list[CallEntry]) -> Counts:
        """Set each entry's attempt; the counts to keep once the transaction commits are returned."""
        counts: Counts = {}
        held = self._tx.held
        for e in entries:
            key = (e.session_id, e.name, e.identity()[1])
            prior = counts.get(key)
            if prior is None:
                prior = self._attempts.get(key) if e.session_id in held else None
            if prior is None:
                (prior,) = db.execute(COUNT_PRIOR, (e.session_id, e.name, key[2], e.seq)).fetchone()
            e.attempt = int(prior) + 1
            counts[key] = e.attempt
        return counts

    def _remember_attempts(self, counts: Counts) -> None:
        if len(self._attempts) + len(counts) > MEMO_ENTRIES:
            self._attempts.clear()
        held = self._tx.held
        for key, attempt in counts.items():
            if key[0] in held:
                self._attempts[key] = attempt

    def forget(self, session_id: str) -> None:
        for k in [k for k in self._attempts if k[0] == session_id]:
            del self._attempts[k]


def _also(db: sqlite3.Connection, also: StepWrites, records: Callable[[], tuple[int, list[CallRecord]]]) -> None:
    db.execute("SAVEPOINT step_writes")
    try:
        step, recs = records()
        also.write(db, step, recs)
    except Exception as e:  # the caller's, not the step's: undone, and the step settles
        db.execute("ROLLBACK TO step_writes")
        also.error = e
    db.execute("RELEASE step_writes")

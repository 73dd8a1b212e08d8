"""The rows of a durable call, written in as few transactions as durability needs.

A call's facts are gathered in one ``CallEntry`` and written by the store in batches:
``write_intents`` commits the intent rows (state 'started') of a whole run of overlapping Never
calls in one transaction before the run starts; ``write_settlements`` writes a step's results, in
call order, in one transaction per batch. A call whose replay policy is Safe has no intent row: its
row is inserted already settled, with its call-started event, when it settles (it may be run again
by definition, so a process killed while it ran leaves nothing to recover for it).

Every value is encoded once (arguments, declarations, metadata), and every statement is one of the
constant SQL strings below, so sqlite3's statement cache prepares each of them once per connection.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

INSERT_EVENT = "INSERT INTO events (session_id, step, call_seq, call_id, kind, data, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
COUNT_PRIOR = "SELECT COUNT(*) FROM calls WHERE session_id = ? AND name = ? AND args_digest = ? AND seq < ?"
INSERT_INTENT = (
    "INSERT INTO calls (seq, session_id, step, idx, call_id, name, arguments, args_digest, effect, replay,"
    " concurrency, state, attempt, started_at, recorded_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'started', ?, ?, ?)"
)
INSERT_SETTLED = (
    "INSERT INTO calls (seq, session_id, step, idx, call_id, name, arguments, args_digest, effect, replay,"
    " concurrency, state, attempt, outcome, block_kind, cancelled, text, metadata, started_at, ended_at, recorded_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'settled', ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_SETTLED = (
    "UPDATE calls SET state = 'settled', outcome = ?, block_kind = ?, cancelled = ?, text = ?, metadata = ?,"
    " started_at = ?, ended_at = ? WHERE seq = ?"
)


def dumps(v: Any) -> str:
    """JSON for a column. Text that is not valid Unicode (a lone surrogate from a "\\ud800" escape)
    cannot be stored as UTF-8, so such a value is written with \\u escapes: lossless either way."""
    text = json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(v, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


def as_text(v: str) -> str:
    """A model-visible text column: a lone surrogate is shown escaped rather than failing the write."""
    if v.isascii():
        return v
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return v.encode("utf-8", "backslashreplace").decode("utf-8")
    return v


def args_digest(name: str, arguments: Any) -> str:
    blob = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True, eq=False)
class CallEntry:
    """What the store writes of one call. ``kind``: 'intent' (a Never call: its intent row is
    committed before it starts, and settling updates that row), 'ran' (a Safe call that ran without
    an intent row: inserted settled, with its call-started event) or 'settled' (a call that never
    ran: a refusal, or one the cancellation of its step kept from starting)."""

    kind: str
    session_id: str
    step: int
    idx: int
    call_id: str
    name: str
    arguments: Any
    declarations: dict[str, str]
    seq: int = 0
    attempt: int = 1
    started_at: float | None = None
    ended_at: float | None = None
    outcome: str | None = None
    block_kind: str | None = None
    cancelled: bool = False
    text: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    event: tuple[str, dict[str, Any]] | None = None
    intent_written: bool = False

    def _identity(self) -> tuple[str, str]:
        return dumps(self.arguments), args_digest(self.name, self.arguments)

    def _attempt(self, db: sqlite3.Connection, digest: str) -> int:
        (prior,) = db.execute(COUNT_PRIOR, (self.session_id, self.name, digest, self.seq)).fetchone()
        return int(prior) + 1

    def write_intent(self, db: sqlite3.Connection) -> None:
        arguments, digest = self._identity()
        self.attempt = self._attempt(db, digest)
        d = self.declarations
        db.execute(
            INSERT_INTENT,
            (
                self.seq,
                self.session_id,
                self.step,
                self.idx,
                self.call_id,
                self.name,
                arguments,
                digest,
                d["effect"],
                d["replay"],
                d["concurrency"],
                self.attempt,
                self.started_at,
                time.time(),
            ),
        )
        self._started_event(db)

    def _started_event(self, db: sqlite3.Connection) -> None:
        data = {"tool": self.name, "attempt": self.attempt, "declarations": self.declarations}
        row = (self.session_id, self.step, self.seq, self.call_id, "call-started", dumps(data), time.time())
        db.execute(INSERT_EVENT, row)

    def write_settlement(self, db: sqlite3.Connection) -> None:
        text, metadata = as_text(self.text), dumps(self.metadata)
        if self.intent_written:
            db.execute(
                UPDATE_SETTLED,
                (
                    self.outcome,
                    self.block_kind,
                    int(self.cancelled),
                    text,
                    metadata,
                    self.started_at,
                    self.ended_at,
                    self.seq,
                ),
            )
        else:
            arguments, digest = self._identity()
            ran = self.kind == "ran"
            if ran:
                self.attempt = self._attempt(db, digest)
            d = self.declarations
            db.execute(
                INSERT_SETTLED,
                (
                    self.seq,
                    self.session_id,
                    self.step,
                    self.idx,
                    as_text(self.call_id),
                    as_text(self.name),
                    arguments,
                    digest,
                    d["effect"],
                    d["replay"],
                    d["concurrency"],
                    self.attempt,
                    self.outcome,
                    self.block_kind,
                    int(self.cancelled),
                    text,
                    metadata,
                    self.started_at if ran else None,
                    self.ended_at if ran else None,
                    time.time(),
                ),
            )
            if ran:
                self._started_event(db)
        if self.event is not None:
            db.execute(
                INSERT_EVENT,
                (self.session_id, self.step, self.seq, self.call_id, self.event[0], dumps(self.event[1]), time.time()),
            )

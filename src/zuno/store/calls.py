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


# json.dumps with options builds an encoder per call; these are built once (the same output).
_COLUMN_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_COLUMN_JSON_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str).encode


def dumps(v: Any) -> str:
    """JSON for a column. Text that is not valid Unicode (a lone surrogate from a "\\ud800" escape)
    cannot be stored as UTF-8, so such a value is written with \\u escapes: lossless either way."""
    text = _COLUMN_JSON(v)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _COLUMN_JSON_ASCII(v)
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


def _flat_sorted(arguments: Any) -> bool:
    """Arguments whose plain encoding is also their sorted one, byte for byte: an object of ASCII
    strings and other scalars with its keys in order (most calls), so one encoding serves both the
    column and the digest."""
    if not isinstance(arguments, dict):
        return isinstance(arguments, int | float | bool | type(None)) or (
            isinstance(arguments, str) and arguments.isascii()
        )
    prev = None
    for k, v in arguments.items():
        if not isinstance(k, str) or not k.isascii() or (prev is not None and k <= prev):
            return False
        if isinstance(v, str):
            if not v.isascii():
                return False
        elif not isinstance(v, int | float | bool | type(None)):
            return False
        prev = k
    return True


def identity(name: str, arguments: Any) -> tuple[str, str]:
    """The arguments column and the digest of (name, arguments), encoding the arguments once
    when their plain encoding is already the sorted one (the digest is then of the same bytes
    ``args_digest`` hashes)."""
    text = dumps(arguments)
    if name.isascii() and name.isidentifier() and _flat_sorted(arguments):
        return text, hashlib.sha256(f'["{name}",{text}]'.encode()).hexdigest()
    return text, args_digest(name, arguments)


_DECLARATIONS_JSON: dict[tuple[str, str, str], str] = {}
_SETTLED_JSON: dict[tuple[str, bool], str] = {}


def declarations_json(d: dict[str, str]) -> str:
    key = (d["effect"], d["replay"], d["concurrency"])
    text = _DECLARATIONS_JSON.get(key)
    if text is None:
        text = _DECLARATIONS_JSON[key] = dumps(d)
    return text


def started_data(name: str, attempt: int, declarations: dict[str, str]) -> str:
    """The call-started event's data, as ``dumps`` writes it, without encoding the constant parts."""
    if name.isascii() and name.isidentifier():
        return f'{{"tool":"{name}","attempt":{int(attempt)},"declarations":{declarations_json(declarations)}}}'
    return dumps({"tool": name, "attempt": attempt, "declarations": declarations})


def event_data(data: dict[str, Any]) -> str:
    """An event's data; the usual call-settled data (outcome and cancelled) from a table."""
    if len(data) == 2:
        outcome, cancelled = data.get("outcome"), data.get("cancelled")
        if isinstance(outcome, str) and isinstance(cancelled, bool):
            key = (outcome, cancelled)
            text = _SETTLED_JSON.get(key)
            if text is None:
                text = dumps({"outcome": outcome, "cancelled": cancelled})
                if len(_SETTLED_JSON) < 64:
                    _SETTLED_JSON[key] = text
            return text
    return dumps(data)


@dataclass(slots=True, eq=False)
class CallEntry:
    """What the store writes of one call. ``kind``: 'intent' (a Never call: its intent row is
    committed before it starts, and settling updates that row), 'ran' (a Safe call that ran without
    an intent row: inserted settled, with its call-started event) or 'settled' (a call that never
    ran: a refusal, or one the cancellation of its step kept from starting).

    The entry makes the rows; the store writes them, a batch of entries per statement."""

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
    _identity: tuple[str, str] | None = None

    def identity(self) -> tuple[str, str]:
        """(arguments column, digest), encoded once."""
        if self._identity is None:
            self._identity = identity(self.name, self.arguments)
        return self._identity

    def intent_row(self, now: float) -> tuple[Any, ...]:
        arguments, digest = self.identity()
        d = self.declarations
        return (
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
            now,
        )

    def started_event(self, now: float) -> tuple[Any, ...]:
        data = started_data(self.name, self.attempt, self.declarations)
        return (self.session_id, self.step, self.seq, self.call_id, "call-started", data, now)

    def update_row(self) -> tuple[Any, ...]:
        return (
            self.outcome,
            self.block_kind,
            int(self.cancelled),
            as_text(self.text),
            dumps(self.metadata),
            self.started_at,
            self.ended_at,
            self.seq,
        )

    def settled_row(self, now: float) -> tuple[Any, ...]:
        arguments, digest = self.identity()
        ran = self.kind == "ran"
        d = self.declarations
        return (
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
            as_text(self.text),
            dumps(self.metadata),
            self.started_at if ran else None,
            self.ended_at if ran else None,
            now,
        )

    def settled_event(self, now: float) -> tuple[Any, ...] | None:
        if self.event is None:
            return None
        return (self.session_id, self.step, self.seq, self.call_id, self.event[0], event_data(self.event[1]), now)

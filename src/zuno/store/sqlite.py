"""SQLite store in WAL mode: ``Store``, the one holder of durable facts.

Every write is its own committed transaction, so a fact is durable the moment the method
returns: the intent row of a call is on disk before the call starts. Several processes may use
one database; a session is driven by one process at a time, held by an advisory file lock that
the kernel releases when the holder dies (so a kill -9 never leaves a session stuck).

``Store`` is a facade over collaborators that share its connection (``Transactions``), each with
one job:

- ``zuno.store.connection``: opening (pragmas, migrations) and closing the connection;
- ``zuno.store.transaction``: the transactions, and the rows that ride with the next one;
- ``zuno.store.sessions``: a session's row and its driver's lock;
- ``zuno.store.steps``: numbering, beginning and ending steps;
- ``zuno.store.numbers``: call numbers and agent request ids, reserved in blocks;
- ``zuno.store.call_writes``: the intents and settlements of calls, and their attempt numbers;
- ``zuno.store.notices``: queuing and delivering notices;
- ``zuno.store.receipts``: read receipts;
- ``zuno.store.queries``: what is read back (sessions, calls, events, artifacts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.store import pruning, queries
from zuno.store.artifact_rows import ArtifactRows
from zuno.store.call_writes import INTENT_SYNCHRONOUS, CallWrites
from zuno.store.calls import INSERT_EVENT, CallEntry, dumps
from zuno.store.connection import (
    WAL_AUTOCHECKPOINT_PAGES,
    WAL_SIZE_LIMIT_BYTES,
    StoreConnection,
    StoreLocked,
    applied_migrations,
    checkpoint_and_close,
    open_db,
)
from zuno.store.notices import Notices
from zuno.store.numbers import CALL_SEQ_BLOCK, REQUEST_ID_BLOCK, Numbers
from zuno.store.queries import CallRow
from zuno.store.receipts import Receipts
from zuno.store.schema import MIGRATIONS
from zuno.store.sessions import SessionBusy, Sessions
from zuno.store.steps import Steps
from zuno.store.transaction import MEMO_ENTRIES, Transactions, write_events

if TYPE_CHECKING:
    import sqlite3

    from zuno.records import CallRecord, StepWrites

__all__ = [  # the names this module has offered, wherever they live now
    "CALL_SEQ_BLOCK",
    "INTENT_SYNCHRONOUS",
    "MEMO_ENTRIES",
    "REQUEST_ID_BLOCK",
    "WAL_AUTOCHECKPOINT_PAGES",
    "WAL_SIZE_LIMIT_BYTES",
    "CallRow",
    "SessionBusy",
    "Store",
    "StoreLocked",
]


class Store:
    """The store at ``path``. With ``readonly`` an existing database is opened for reading only
    (nothing is created or migrated: the commands that only look use it); ``path`` must then
    exist. Otherwise the database is created when missing, in a directory that must exist."""

    def __init__(
        self, path: Path, extra_migrations: list[tuple[str, str]] | None = None, *, readonly: bool = False
    ) -> None:
        self.path = path
        self.readonly = readonly
        self._tx = tx = Transactions(open_db(path, [*MIGRATIONS, *(extra_migrations or [])], readonly=readonly))
        self._lock = tx.lock
        self._sessions = Sessions(tx, path.parent / "locks")
        self._notices = Notices(tx)
        self._steps = Steps(tx, self._notices)
        self._receipts = Receipts(tx)
        self._artifacts = ArtifactRows(tx)
        # In this order: a step's row before its receipts and artifact rows.
        tx.riders = (self._steps, self._receipts, self._artifacts)
        self._numbers = Numbers(tx)
        self._calls = CallWrites(tx, self._steps, self._numbers)

    def wait_for_locks_again(self) -> None:
        """The next write waits the whole busy wait for a lock again, even when the last statement
        found the store locked by another process (a new run, after its user let the lock go)."""
        db = self._tx.db
        if isinstance(db, StoreConnection):  # (a wrapper recording the statements has no flag)
            db.locked_out = False
            db.interrupted = None

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection (a caller may swap it for a wrapper that records the statements)."""
        return self._tx.db

    @_db.setter
    def _db(self, db: sqlite3.Connection) -> None:
        self._tx.db = db

    @property
    def intent_synchronous(self) -> str:
        """The synchronous level of the commit of Never calls' intents (``INTENT_SYNCHRONOUS``)."""
        return self._calls.intent_synchronous

    @intent_synchronous.setter
    def intent_synchronous(self, level: str) -> None:
        self._calls.intent_synchronous = level

    # -- plumbing -------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One committed transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any error."""
        with self._lock:
            self._notices.written()  # what a tool family writes may be a notice
            with self._tx.begin() as (db, events):
                write_events(db, events)
                yield db

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """One committed statement, for tool families that keep their own tables."""
        with self._lock:
            self._notices.written()
            return self._tx.execute(sql, params)

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        return self._tx.query(sql, params)

    def applied_migrations(self) -> list[str]:
        with self._lock:
            return applied_migrations(self._tx.db)

    @contextmanager
    def best_effort(self) -> Iterator[None]:
        """Writes that may be left out (a session's closing event): a store another process keeps
        locked skips them instead of failing, without a second busy wait when the last statement
        already found it locked (``Transactions.best_effort``)."""
        with self._tx.best_effort():
            yield

    def close(self) -> None:
        with self._lock:
            for sid in list(self._tx.held):
                self.release_session(sid)
            if self.readonly:
                self._tx.db.close()
                return
            if self._tx.pending():  # a step row with no fact of its own, read receipts: may be left out
                with self._tx.best_effort(), self._tx.begin():
                    pass
            checkpoint_and_close(self._tx.db)

    # -- sessions -------------------------------------------------------------------------------

    def acquire_session(self, session_id: str) -> None:
        """Hold the session for this process; SessionBusy names the holder otherwise. The lock file
        is removed again on release (``zuno.store.locks``), so the locks directory does not grow."""
        self._sessions.acquire(session_id)

    def release_session(self, session_id: str) -> None:
        with self._tx.best_effort():  # sessions.last_step only: the steps rows are the truth
            self._steps.release(session_id)
        self._sessions.release(session_id, self._forget)

    def _forget(self, session_id: str) -> None:
        """Drop what is kept in memory of a session this process no longer drives."""
        self._notices.forget(session_id)
        self._calls.forget(session_id)
        self._receipts.forget(session_id)

    def holds_session(self, session_id: str) -> bool:
        """Does this process hold (drive) the session?"""
        return session_id in self._tx.held

    def delete_session(self, session_id: str) -> dict[str, int]:
        """Delete every record of a session this process holds (``acquire_session`` first: no other
        process can be driving it), in one transaction; the rows deleted per table. The workspace's
        memory is kept (``store.pruning``)."""
        if session_id not in self._tx.held:
            raise SessionBusy(f"session {session_id} is not held by this process: acquire it before deleting it.")
        return pruning.delete_session(self._tx, session_id)

    def session_activity(self, root: str) -> list[tuple[str, float]]:
        """``root``'s sessions with when each was last active, most recent first."""
        return pruning.session_activity(self._tx, root)

    def ensure_session(self, session_id: str | None, root: str, profile: str) -> str:
        """The session (made when new); one of another workspace root is refused
        (``SessionOfAnotherWorkspace``), nothing written."""
        return self._sessions.ensure(session_id, root, profile, self.path)

    def session_exists(self, session_id: str) -> bool:
        return queries.session_exists(self._tx, session_id)

    def session_root(self, session_id: str) -> str | None:
        """The workspace root the session belongs to (None: no such session)."""
        return queries.session_root(self._tx, session_id)

    def latest_session(self, root: str | None = None) -> str | None:
        """The most recently active session (of this workspace root, when given), or None."""
        return queries.latest_session(self._tx, root)

    def list_sessions(self, root: str | None = None) -> list[dict[str, Any]]:
        """Every session (of this workspace root, when given), most recently active first: id,
        root, profile, started (epoch seconds), last step (its number and start), calls, open jobs."""
        return queries.list_sessions(self._tx, root)

    # -- steps ----------------------------------------------------------------------------------

    def begin_step(self, session_id: str, event: dict[str, Any] | None = None) -> int:
        """Number the next step of the session. The step row and its step-started event are written
        with the step's first durable fact, in that fact's transaction (one commit less per step); a
        step that never wrote anything left nothing to record. Safe because a session has one driver
        process; steps of that process may overlap (each begin flushes the one still pending)."""
        return self._steps.begin(session_id, event)

    def end_step(self, session_id: str, n: int) -> None:
        self._steps.end(session_id, n)

    # -- calls ----------------------------------------------------------------------------------

    def next_call_seq(self) -> int:
        """The number of the next call of this process. Numbers are reserved in blocks (one commit
        per CALL_SEQ_BLOCK calls, raising the table's AUTOINCREMENT counter), so another process
        using this database never takes one of them. (Only the dispatcher numbers calls, before any
        call of the run starts: a store another process keeps locked is ``StoreLocked`` saying so.)"""
        try:
            return self._numbers.next_call_seq()
        except StoreLocked as e:
            raise e.having("No call number could be reserved, so the call was not started: nothing ran.") from None

    def next_request_id(self) -> int:
        """The id of the next agent request of this process, reserved as call numbers are: a
        request row can then be written with its outcome, in the same commit."""
        return self._numbers.next_request_id()

    def call_seq_floor(self) -> int:
        """A seq that no call this process numbers from now on is at or under: below its reserved
        block's next number (no query), else the table's highest seq (the next block lies above)."""
        return self._numbers.call_seq_floor()

    def write_intents(self, entries: list[CallEntry]) -> None:
        """Commit the intent rows (and call-started events) of these Never calls in one transaction,
        with ``synchronous`` at ``intent_synchronous`` (FULL) for that commit: each entry's attempt
        number is set. Called before any of them starts. A store another process keeps locked is
        ``StoreLocked``, saying that none of them started."""
        try:
            self._calls.write_intents(entries)
        except StoreLocked as e:
            raise e.having(_not_started(entries)) from None

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
        ``records()`` once every entry has its seq. A store another process keeps locked is
        ``StoreLocked``, saying which calls ran and what their records are now."""
        try:
            self._calls.write_settlements(entries, end_step, also, records)
        except StoreLocked as e:
            raise _unrecorded(e, entries) from None

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
        with self._lock:
            self._notices.written()
            self._calls.settle_call(
                seq,
                outcome=outcome,
                block_kind=block_kind,
                cancelled=cancelled,
                text=text,
                metadata=metadata,
                started_at=started_at,
                ended_at=ended_at,
                event=event,
            )

    def calls(self, session_id: str, step: int | None = None) -> list[CallRow]:
        return queries.calls(self._tx, session_id, step)

    def unsettled_calls(self, session_id: str) -> list[CallRow]:
        return queries.unsettled_calls(self._tx, session_id)

    # -- events and notices ---------------------------------------------------------------------

    def add_event(
        self,
        session_id: str,
        kind: str,
        data: dict[str, Any] | None = None,
        *,
        step: int | None = None,
        call_seq: int | None = None,
        call_id: str | None = None,
    ) -> int:
        row = (session_id, step, call_seq, call_id, kind, dumps(data or {}), time.time())
        cur = self._tx.execute(INSERT_EVENT, row)
        return int(cur.lastrowid or 0)

    def events(self, session_id: str) -> list[dict[str, Any]]:
        return queries.events(self._tx, session_id)

    def add_notice(self, session_id: str, kind: str, text: str, data: dict[str, Any] | None = None) -> int:
        return self._notices.add(session_id, kind, text, data)

    def take_notices(self, session_id: str, step: int, running: Collection[int] = ()) -> list[dict[str, Any]]:
        """The pending notices of the session, for this step. They are marked delivered in the
        transaction that ends the step, so a step that dies before it ends delivers them again
        with the next one: a notice may be seen twice, never lost. ``running``: the other steps of
        the session still in progress in this process, whose notices are theirs.

        A session this process drives gets its notices written through this store only, so once a
        look found none, the next step needs no query until something is written (``execute``,
        ``transaction``, ``add_notice``)."""
        return self._notices.take(session_id, step, running)

    def notices_pending(self, session_id: str) -> bool:
        """Is a notice of the session waiting for a step? (No query when the last look found none
        and nothing was written since: see ``take_notices``.)"""
        return self._notices.pending(session_id)

    def notices_in_flight(self, session_id: str) -> int:
        """The highest notice seq already handed to a step of this session that has not ended yet
        (0 if none). Such a notice is consumed even though ``delivered_step`` is still NULL: a family
        that withdraws an unconsumed notice (an inline read superseding a queued callback) must
        treat it as delivered. Call it inside ``transaction()`` to be atomic with take_notices."""
        return self._notices.in_flight(session_id)

    # -- artifacts and read receipts ------------------------------------------------------------

    def record_artifact(
        self, session_id: str, call_seq: int | None, path: str, kind: str, size: int, sha256: str
    ) -> None:
        """Record that the file at path (its bytes already durable) is an artifact of this call.

        The row rides with the next transaction — normally the settle of the call that saved the
        file, whose result names it — so it becomes durable together with that result, at no commit
        of its own (``zuno.store.artifact_rows``)."""
        with self._lock:
            self._notices.written()  # as every write through ``execute``
            self._artifacts.put(session_id, call_seq, path, kind, size, sha256)

    def artifact(self, path: str) -> Any:
        """The artifact row for path (a mapping with session_id, call_seq, kind, size, sha256), or None."""
        return self._artifacts.read(path)

    def put_read_receipt(
        self, session_id: str, path: str, sha256: str, size: int, mtime_ns: int, call_seq: int | None
    ) -> int:
        """Record that this session has seen exactly these bytes at path; returns the generation.

        The receipt rides with the session's next transaction — normally the settle of the call that
        read the file — so it becomes durable together with the result that showed those bytes, at no
        commit of its own (``zuno.store.receipts``)."""
        return self._receipts.put(session_id, path, sha256, size, mtime_ns, call_seq)

    def read_receipt(self, session_id: str, path: str) -> Any:
        """The session's receipt for path (a mapping with sha256, size, mtime_ns, generation), or None."""
        return self._receipts.read(session_id, path)

    def drop_read_receipt(self, session_id: str, path: str) -> None:
        with self._lock:
            self._notices.written()  # as every write through ``execute``
            self._receipts.drop(session_id, path)


def _names(entries: list[CallEntry]) -> str:
    shown = [f"{e.call_id} ({e.name})" for e in entries[:3]]
    more = f" and {len(entries) - 3} more" if len(entries) > 3 else ""
    return ("call " if len(entries) == 1 else "calls ") + ", ".join(shown) + more


def _not_started(entries: list[CallEntry]) -> str:
    return f"The intent could not be written, so {_names(entries)} {_was(entries)} not started: nothing ran."


def _was(entries: list[CallEntry]) -> str:
    return "was" if len(entries) == 1 else "were"


def _unrecorded(e: StoreLocked, entries: list[CallEntry]) -> StoreLocked:
    """What became of a batch of settlements the lock kept from being written: nothing of it was
    (the transaction rolled back). A Never call's intent row stays unsettled: the next open of the
    session settles it as uncertain and never runs it again (at most once). A Safe call's result is
    not kept (it may be run again by definition); a refused call never ran."""
    never = [x for x in entries if x.intent_written]
    safe = [x for x in entries if not x.intent_written and x.kind == "ran"]
    parts = []
    if never:
        parts.append(
            f"C{_names(never)[1:]} ran, but {'its result' if len(never) == 1 else 'their results'} could not be "
            f"recorded: {'its' if len(never) == 1 else 'their'} record stays unsettled, and the next open of "
            "the session settles it as uncertain and never runs it again; inspect what it changed before "
            "running it again."
        )
    if safe:
        parts.append(
            f"C{_names(safe)[1:]} ran, but {'its result was' if len(safe) == 1 else 'their results were'} not "
            "recorded (replay Safe: it may be run again)."
        )
    if not parts:
        parts.append(f"The results of {_names(entries)} (none of which ran) were not recorded.")
    return e.having(" ".join(parts), ran=bool(never or safe))

"""SQLite store in WAL mode.

Every write is its own committed transaction, so a fact is durable the moment the method
returns: the intent row of a call is on disk before the call starts. Several processes may use
one database; a session is driven by one process at a time, held by an advisory file lock that
the kernel releases when the holder dies (so a kill -9 never leaves a session stuck).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
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
from zuno.store.locks import hold_lock_file, release_lock_file
from zuno.store.paths import StoreUnusable, check_store_path
from zuno.store.schema import MIGRATIONS

if TYPE_CHECKING:
    from zuno.records import CallRecord, StepWrites

WAL_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 64 << 20
# Call numbers (calls.seq) are reserved this many at a time, in one commit, so a call knows its
# number before it runs without a commit of its own (a Safe call has no intent row).
CALL_SEQ_BLOCK = 256
REQUEST_ID_BLOCK = 64  # agent request ids reserved at once (see next_request_id)
# The synchronous level of the transaction that commits Never calls' intents: FULL fsyncs the WAL
# at that commit, so an intent survives a power loss, not only a crash of the process.
INTENT_SYNCHRONOUS = "FULL"
# What a session's driver keeps in memory of its own writes, so a call needs no query for them:
# the attempt number of each (tool, arguments) and the generation of each read receipt. Entries
# past this many are forgotten (the next one is read from the database again).
MEMO_ENTRIES = 4096

# A session's number of steps: ``sessions.last_step`` is brought up to date when the process that
# drove it lets it go (not with every step: one row less per commit); the steps rows are the truth.
UPDATE_LAST_STEP = "UPDATE sessions SET last_step = MAX(last_step, ?) WHERE id = ?"
NEXT_STEP = (
    "SELECT MAX(s.last_step, COALESCE((SELECT MAX(t.n) FROM steps t WHERE t.session_id = s.id), 0)) + 1"
    " FROM sessions s WHERE s.id = ?"
)
INSERT_STEP = "INSERT INTO steps (session_id, n, started_at, ended_at) VALUES (?, ?, ?, ?)"
END_STEP = "UPDATE steps SET ended_at = ? WHERE session_id = ? AND n = ?"
DELIVER_NOTICES = "UPDATE notices SET delivered_step = ? WHERE session_id = ? AND delivered_step IS NULL AND seq <= ?"
# An existing receipt is updated in place (its key is unchanged, so the key's index is not touched).
PUT_RECEIPT = (
    "INSERT INTO read_receipts (session_id, path, sha256, size, mtime_ns, generation, call_seq, at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, path) DO UPDATE SET sha256 = excluded.sha256,"
    " size = excluded.size, mtime_ns = excluded.mtime_ns, generation = excluded.generation,"
    " call_seq = excluded.call_seq, at = excluded.at"
)
RECEIPT_GENERATION = "SELECT generation FROM read_receipts WHERE session_id = ? AND path = ?"
PENDING_NOTICES = "SELECT * FROM notices WHERE session_id = ? AND delivered_step IS NULL AND seq > ? ORDER BY seq"


class SessionBusy(Exception):
    """Another process is driving this session."""


@dataclass(slots=True)
class CallRow:
    seq: int
    session_id: str
    step: int
    idx: int
    call_id: str
    name: str
    arguments: Any
    effect: str
    replay: str
    concurrency: str
    state: str
    attempt: int
    outcome: str | None
    block_kind: str | None
    cancelled: bool
    text: str | None
    metadata: dict[str, Any]
    started_at: float | None
    ended_at: float | None


_dumps = dumps
_text = as_text


class Store:
    """The store at ``path``. With ``readonly`` an existing database is opened for reading only
    (nothing is created or migrated: the commands that only look use it); ``path`` must then
    exist. Otherwise the database is created when missing, in a directory that must exist."""

    def __init__(
        self, path: Path, extra_migrations: list[tuple[str, str]] | None = None, *, readonly: bool = False
    ) -> None:
        self.path = path
        self.readonly = readonly
        self._migrations = [*MIGRATIONS, *(extra_migrations or [])]
        exists = check_store_path(path, create=not readonly)
        if readonly and not exists:
            raise StoreUnusable(f"store {path} does not exist.")
        self._lock = threading.RLock()
        self._session_locks: dict[str, tuple[int, Path]] = {}
        self._pending_steps: dict[str, tuple[int, dict[str, Any] | None, float]] = {}
        self._deliver_on_end: dict[tuple[str, int], int] = {}
        self._pending_receipts: dict[tuple[str, str], dict[str, Any]] = {}
        self._seq_next = self._seq_end = 0
        self._request_next = self._request_end = 0
        self._last_step: dict[str, int] = {}
        # Of the sessions this process drives (their facts are written through this store only):
        self._attempts: dict[tuple[str, str, str], int] = {}  # (session, tool, digest) -> last attempt
        self._generations: dict[tuple[str, str], int] = {}  # (session, path) -> receipt generation
        self._no_notices: set[str] = set()  # no notice pending as of the last look, none added since
        self.intent_synchronous = INTENT_SYNCHRONOUS
        try:
            if readonly:
                self._db = sqlite3.connect(
                    f"{path.absolute().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
                )
                self._db.row_factory = sqlite3.Row
                self._db.execute("PRAGMA busy_timeout=30000")
                self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return
            self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30.0)
            self._open()
        except sqlite3.DatabaseError as e:
            with contextlib.suppress(Exception):
                self._db.close()
            raise StoreUnusable(
                f"store {path} cannot be used as a SQLite database ({e}). Name another file with --db."
            ) from None

    def _open(self) -> None:
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=30000")
        # Commits in WAL mode with synchronous=NORMAL do not fsync; checkpoints do. Checkpointing every
        # ~40 MB of WAL instead of every 4 MB keeps those fsyncs off the per-call path (about 10% of a
        # durable call); the WAL is truncated back after a checkpoint, and checkpointed on close.
        self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        self._db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
        self._migrate()

    # -- plumbing -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL)"
                )
                done = {r[0] for r in self._db.execute("SELECT name FROM schema_migrations")}
                for name, sql in self._migrations:
                    if name in done:
                        continue
                    for statement in (s.strip() for s in sql.split(";")):
                        if statement:
                            self._db.execute(statement)
                    self._db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One committed transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any error."""
        with self._lock:
            self._no_notices.clear()  # what a tool family writes may be a notice
            with self._transaction() as (db, events):
                self._write_events(db, events)
                yield db

    @contextmanager
    def _transaction(
        self, ending: tuple[str, int] | None = None
    ) -> Iterator[tuple[sqlite3.Connection, list[tuple[Any, ...]]]]:
        """The store's own transaction: the pending step rows and read receipts go first (a step
        that also ends in it, ``ending``, is written ended); the event rows the body appends are
        written together (``_write_events``) before the commit."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            flushed = bool(self._pending_steps or self._pending_receipts)
            events: list[tuple[Any, ...]] = []
            try:
                self._flush_pending_steps(db, events, ending)
                self._flush_pending_receipts(db)
                yield db, events
                self._write_events(db, events)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            if flushed:
                self._remember_receipts()
                self._pending_steps.clear()
                self._pending_receipts.clear()

    @staticmethod
    def _write_events(db: sqlite3.Connection, events: list[tuple[Any, ...]]) -> None:
        if len(events) == 1:
            db.execute(INSERT_EVENT, events[0])
        elif events:
            db.executemany(INSERT_EVENT, events)
        events.clear()

    def _event(
        self,
        db: sqlite3.Connection,
        session_id: str,
        kind: str,
        data: dict[str, Any] | None,
        step: int | None,
        call_seq: int | None,
        call_id: str | None,
    ) -> None:
        db.execute(INSERT_EVENT, (session_id, step, call_seq, call_id, kind, _dumps(data or {}), time.time()))

    def applied_migrations(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT name FROM schema_migrations ORDER BY rowid")]

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """One committed statement, for tool families that keep their own tables."""
        with self._lock:
            self._no_notices.clear()
            return self._execute(sql, params)

    def _execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            if self._pending_steps or self._pending_receipts:
                with self._transaction() as (db, events):
                    self._write_events(db, events)  # the step's first events come before this statement
                    return db.execute(sql, params)
            return self._db.execute(sql, params)

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, params))

    def close(self) -> None:
        with self._lock:
            for sid in list(self._session_locks):
                self.release_session(sid)
            if self.readonly:
                self._db.close()
                return
            if self._pending_steps or self._pending_receipts:
                with self._transaction():
                    pass
            # If another process holds the database busy, its own close checkpoints.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._db.close()

    # -- sessions -------------------------------------------------------------------------------

    def _lock_path(self, session_id: str) -> Path:
        safe = hashlib.sha256(session_id.encode()).hexdigest()[:24]
        d = self.path.parent / "locks"
        d.mkdir(exist_ok=True)
        return d / f"session-{safe}.lock"

    def acquire_session(self, session_id: str) -> None:
        """Hold the session for this process; SessionBusy names the holder otherwise. The lock file
        is removed again on release (``zuno.store.locks``), so the locks directory does not grow."""
        if session_id in self._session_locks:
            raise SessionBusy(f"session {session_id} is already open in this process.")
        lp = self._lock_path(session_id)
        fd = hold_lock_file(lp)
        if fd is None:
            raise SessionBusy(f"session {session_id}: its lock file kept changing under {lp.parent}; try again.")
        if isinstance(fd, str):
            raise SessionBusy(
                f"session {session_id} is being driven by another process (pid {fd}); "
                "a session is driven by one process at a time. Wait for it to finish, or use another session."
            )
        self._session_locks[session_id] = (fd, lp)

    def release_session(self, session_id: str) -> None:
        last = self._last_step.pop(session_id, None)
        if last is not None and session_id in self._session_locks:
            with contextlib.suppress(sqlite3.Error):
                self._execute(UPDATE_LAST_STEP, (last, session_id))
        held = self._session_locks.pop(session_id, None)
        self._forget(session_id)
        if held is not None:
            release_lock_file(*held)

    def _forget(self, session_id: str) -> None:
        """Drop what is kept in memory of a session this process no longer drives."""
        self._no_notices.discard(session_id)
        for k in [k for k in self._attempts if k[0] == session_id]:
            del self._attempts[k]
        for g in [g for g in self._generations if g[0] == session_id]:
            del self._generations[g]

    def ensure_session(self, session_id: str | None, root: str, profile: str) -> str:
        sid = session_id or f"ses_{uuid.uuid4().hex[:16]}"
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO sessions (id, created_at, root, profile) VALUES (?, ?, ?, ?)",
                (sid, time.time(), root, profile),
            )
        return sid

    def session_exists(self, session_id: str) -> bool:
        return bool(self.query("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    def latest_session(self, root: str | None = None) -> str | None:
        """The most recently active session (of this workspace root, when given), or None."""
        where, params = ("WHERE s.root = ?", (root,)) if root is not None else ("", ())
        rows = self.query(
            "SELECT s.id FROM sessions s LEFT JOIN steps t ON t.session_id = s.id "
            f"{where} GROUP BY s.id ORDER BY MAX(COALESCE(t.started_at, s.created_at)) DESC, s.rowid DESC LIMIT 1",
            params,
        )
        return str(rows[0][0]) if rows else None

    def list_sessions(self, root: str | None = None) -> list[dict[str, Any]]:
        """Every session (of this workspace root, when given), most recently active first: id,
        root, profile, started (epoch seconds), last step (its number and start), calls, open jobs."""
        where, params = ("WHERE s.root = ?", (root,)) if root is not None else ("", ())
        has_jobs = bool(self.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"))
        jobs = "(SELECT COUNT(*) FROM jobs j WHERE j.session_id = s.id AND j.ended_at IS NULL)" if has_jobs else "0"
        rows = self.query(
            "SELECT s.id, s.root, s.profile, s.created_at,"
            " MAX(s.last_step, COALESCE((SELECT MAX(t.n) FROM steps t WHERE t.session_id = s.id), 0)) AS last_step,"
            " (SELECT MAX(t.started_at) FROM steps t WHERE t.session_id = s.id) AS last_step_at,"
            " (SELECT COUNT(*) FROM calls c WHERE c.session_id = s.id) AS calls,"
            f" {jobs} AS open_jobs FROM sessions s {where}"
            " ORDER BY COALESCE(last_step_at, s.created_at) DESC, s.rowid DESC",
            params,
        )
        return [
            {
                "id": r["id"],
                "root": r["root"],
                "profile": r["profile"],
                "started_at": r["created_at"],
                "last_step": r["last_step"],
                "last_step_at": r["last_step_at"],
                "calls": r["calls"],
                "open_jobs": r["open_jobs"],
            }
            for r in rows
        ]

    def begin_step(self, session_id: str, event: dict[str, Any] | None = None) -> int:
        """Number the next step of the session. The step row and its step-started event are written
        with the step's first durable fact, in that fact's transaction (one commit less per step); a
        step that never wrote anything left nothing to record. Safe because a session has one driver
        process; steps of that process may overlap (each begin flushes the one still pending)."""
        with self._lock:
            last = self._last_step.get(session_id)
            if last is None:
                (n,) = self._db.execute(NEXT_STEP, (session_id,)).fetchone()
            else:  # this process drives the session: it numbered its last step itself
                n = last + 1
            pending = self._pending_steps.get(session_id)
            if pending is not None:  # a previous step of this session wrote nothing: it still takes its number
                n = max(n, pending[0] + 1)
                with self._transaction():
                    pass
            self._pending_steps[session_id] = (int(n), event, time.time())
            self._last_step[session_id] = int(n)
        return int(n)

    def _flush_pending_steps(
        self, db: sqlite3.Connection, events: list[tuple[Any, ...]], ending: tuple[str, int] | None = None
    ) -> None:
        """Write the rows of the steps that began since the last commit; a step that also ends in
        this transaction (``ending``) is written ended, in one row."""
        for session_id, (n, event, started_at) in list(self._pending_steps.items()):
            ended = time.time() if ending == (session_id, n) else None
            if not self._held(session_id):
                db.execute(UPDATE_LAST_STEP, (n, session_id))
            db.execute(INSERT_STEP, (session_id, n, started_at, ended))
            events.append((session_id, n, None, None, "step-started", _dumps(event or {}), started_at))

    def end_step(self, session_id: str, n: int) -> None:
        with self._transaction() as (db, events):
            self._end_step(db, events, session_id, n)

    def _end_step(
        self, db: sqlite3.Connection, events: list[tuple[Any, ...]], session_id: str, n: int, row: bool = True
    ) -> None:
        now = time.time()
        if row:
            db.execute(END_STEP, (now, session_id, n))
        upto = self._deliver_on_end.pop((session_id, n), None)
        if upto is not None:
            db.execute(DELIVER_NOTICES, (n, session_id, upto))
        events.append((session_id, n, None, None, "step-ended", "{}", now))

    # -- calls ----------------------------------------------------------------------------------

    def next_call_seq(self) -> int:
        """The number of the next call of this process. Numbers are reserved in blocks (one commit
        per CALL_SEQ_BLOCK calls, raising the table's AUTOINCREMENT counter), so another process
        using this database never takes one of them."""
        with self._lock:
            if self._seq_next >= self._seq_end:
                self._seq_next, self._seq_end = self._reserve("calls", "seq", CALL_SEQ_BLOCK)
            seq = self._seq_next
            self._seq_next += 1
            return seq

    def next_request_id(self) -> int:
        """The id of the next agent request of this process, reserved as call numbers are: a
        request row can then be written with its outcome, in the same commit."""
        with self._lock:
            if self._request_next >= self._request_end:
                self._request_next, self._request_end = self._reserve("agent_requests", "id", REQUEST_ID_BLOCK)
            n = self._request_next
            self._request_next += 1
            return n

    def _reserve(self, table: str, column: str, block: int) -> tuple[int, int]:
        """Reserve the next ``block`` numbers of an AUTOINCREMENT table: [first, end)."""
        with self._transaction() as (db, _events):
            row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
            (top,) = db.execute(f"SELECT COALESCE(MAX({column}), 0) FROM {table}").fetchone()
            top = max(int(top), int(row[0]) if row else 0)
            bump = (
                "INSERT INTO sqlite_sequence (seq, name) VALUES (?, ?)"
                if row is None
                else "UPDATE sqlite_sequence SET seq = ? WHERE name = ?"
            )
            db.execute(bump, (top + block, table))
        return top + 1, top + 1 + block

    def call_seq_floor(self) -> int:
        """A seq that no call this process numbers from now on is at or under: below its reserved
        block's next number (no query), else the table's highest seq (the next block lies above)."""
        with self._lock:
            if self._seq_next < self._seq_end:
                return self._seq_next - 1
            (top,) = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM calls").fetchone()
            return int(top)

    def _held(self, session_id: str) -> bool:
        return session_id in self._session_locks

    def _number_attempts(self, db: sqlite3.Connection, entries: list[CallEntry]) -> dict[tuple[str, str, str], int]:
        """Set each entry's attempt (1 + the earlier calls of the session with the same tool and
        arguments). A session this process drives keeps its counts in memory; the counts to keep
        once the transaction commits are returned."""
        counts: dict[tuple[str, str, str], int] = {}
        for e in entries:
            key = (e.session_id, e.name, e.identity()[1])
            prior = counts.get(key)
            if prior is None:
                prior = self._attempts.get(key) if self._held(e.session_id) else None
            if prior is None:
                (prior,) = db.execute(COUNT_PRIOR, (e.session_id, e.name, key[2], e.seq)).fetchone()
            e.attempt = int(prior) + 1
            counts[key] = e.attempt
        return counts

    def _remember_attempts(self, counts: dict[tuple[str, str, str], int]) -> None:
        if len(self._attempts) + len(counts) > MEMO_ENTRIES:
            self._attempts.clear()
        for key, attempt in counts.items():
            if self._held(key[0]):
                self._attempts[key] = attempt

    def write_intents(self, entries: list[CallEntry]) -> None:
        """Commit the intent rows (and call-started events) of these Never calls in one transaction,
        with ``synchronous`` at ``intent_synchronous`` (FULL) for that commit: each entry's attempt
        number is set. Called before any of them starts."""
        with self._lock:
            for e in entries:
                if not e.seq:
                    e.seq = self.next_call_seq()
            full = self.intent_synchronous != "NORMAL"
            if full:
                self._db.execute(f"PRAGMA synchronous={self.intent_synchronous}")
            try:
                with self._transaction() as (db, events):
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
                    self._db.execute("PRAGMA synchronous=NORMAL")
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
                    e.seq = self.next_call_seq()
            pending = self._pending_steps.get(end_step[0]) if end_step is not None else None
            ending = end_step if pending is not None and end_step is not None and pending[0] == end_step[1] else None
            with self._transaction(ending) as (db, events):
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
                    self._end_step(db, events, end_step[0], end_step[1], row=ending is None)
                if also is not None and records is not None:
                    self._also(db, also, records)
            self._remember_attempts(counts)
            if also is not None and also.error is None and records is not None:
                also.done = True
                also.committed()
            for e in entries:  # a refused call's row counts too, as COUNT_PRIOR counts it
                if e.kind == "settled" and not e.intent_written:
                    key = (e.session_id, e.name, e.identity()[1])
                    if key in self._attempts:
                        self._attempts[key] += 1

    @staticmethod
    def _also(db: sqlite3.Connection, also: StepWrites, records: Callable[[], tuple[int, list[CallRecord]]]) -> None:
        db.execute("SAVEPOINT step_writes")
        try:
            step, recs = records()
            also.write(db, step, recs)
        except Exception as e:  # the caller's, not the step's: undone, and the step settles
            db.execute("ROLLBACK TO step_writes")
            also.error = e
        db.execute("RELEASE step_writes")

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
        with self.transaction() as db:
            db.execute(
                "UPDATE calls SET state = 'settled', outcome = ?, block_kind = ?, cancelled = ?, text = ?,"
                " metadata = ?, started_at = ?, ended_at = ? WHERE seq = ?",
                (outcome, block_kind, int(cancelled), _text(text), _dumps(metadata), started_at, ended_at, seq),
            )
            if event is not None:
                row = db.execute("SELECT session_id, step, call_id FROM calls WHERE seq = ?", (seq,)).fetchone()
                self._event(db, row[0], event[0], event[1], row[1], seq, row[2])

    def _row(self, r: sqlite3.Row) -> CallRow:
        return CallRow(
            seq=r["seq"],
            session_id=r["session_id"],
            step=r["step"],
            idx=r["idx"],
            call_id=r["call_id"],
            name=r["name"],
            arguments=json.loads(r["arguments"]),
            effect=r["effect"],
            replay=r["replay"],
            concurrency=r["concurrency"],
            state=r["state"],
            attempt=r["attempt"],
            outcome=r["outcome"],
            block_kind=r["block_kind"],
            cancelled=bool(r["cancelled"]),
            text=r["text"],
            metadata=json.loads(r["metadata"]) if r["metadata"] else {},
            started_at=r["started_at"],
            ended_at=r["ended_at"],
        )

    def calls(self, session_id: str, step: int | None = None) -> list[CallRow]:
        if step is None:
            rows = self.query("SELECT * FROM calls WHERE session_id = ? ORDER BY step, idx, seq", (session_id,))
        else:
            rows = self.query(
                "SELECT * FROM calls WHERE session_id = ? AND step = ? ORDER BY idx, seq", (session_id, step)
            )
        return [self._row(r) for r in rows]

    def unsettled_calls(self, session_id: str) -> list[CallRow]:
        rows = self.query("SELECT * FROM calls WHERE session_id = ? AND state = 'started' ORDER BY seq", (session_id,))
        return [self._row(r) for r in rows]

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
        cur = self._execute(INSERT_EVENT, (session_id, step, call_seq, call_id, kind, _dumps(data or {}), time.time()))
        return int(cur.lastrowid or 0)

    def events(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.query("SELECT * FROM events WHERE session_id = ? ORDER BY seq", (session_id,))
        return [
            {
                "seq": r["seq"],
                "step": r["step"],
                "call_seq": r["call_seq"],
                "call_id": r["call_id"],
                "kind": r["kind"],
                "data": json.loads(r["data"]),
                "at": r["at"],
            }
            for r in rows
        ]

    def add_notice(self, session_id: str, kind: str, text: str, data: dict[str, Any] | None = None) -> int:
        cur = self.execute(  # (execute forgets that no notice was pending)
            "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, ?, ?, ?, ?)",
            (session_id, kind, text, _dumps(data or {}), time.time()),
        )
        return int(cur.lastrowid or 0)

    def take_notices(self, session_id: str, step: int, running: Collection[int] = ()) -> list[dict[str, Any]]:
        """The pending notices of the session, for this step. They are marked delivered in the
        transaction that ends the step, so a step that dies before it ends delivers them again
        with the next one: a notice may be seen twice, never lost. ``running``: the other steps of
        the session still in progress in this process, whose notices are theirs.

        A session this process drives gets its notices written through this store only (a notice
        is the driver's: recovery, a job's completion, a server that failed), so once a look found
        none, the next step needs no query until something is written (``execute``,
        ``transaction``, ``add_notice``)."""
        with self._lock:  # atomic with notices_in_flight() readers (a completion claimed exactly once)
            if session_id in self._no_notices:
                return []
            # A notice already handed to another step of this session that is still running (steps run
            # concurrently when an MCP client sends requests together) is that step's: not handed twice.
            floor = max((self._deliver_on_end.get((session_id, m), 0) for m in running), default=0)
            rows = self._db.execute(PENDING_NOTICES, (session_id, floor)).fetchall()
            if rows:
                self._deliver_on_end[(session_id, step)] = rows[-1]["seq"]
            elif not floor and self._held(session_id):
                self._no_notices.add(session_id)
        return [{"kind": r["kind"], "text": r["text"], **json.loads(r["data"])} for r in rows]

    def notices_pending(self, session_id: str) -> bool:
        """Is a notice of the session waiting for a step? (No query when the last look found none
        and nothing was written since: see ``take_notices``.)"""
        with self._lock:
            if session_id in self._no_notices:
                return False
            row = self._db.execute(
                "SELECT 1 FROM notices WHERE session_id = ? AND delivered_step IS NULL LIMIT 1", (session_id,)
            ).fetchone()
            return row is not None

    def notices_in_flight(self, session_id: str) -> int:
        """The highest notice seq already handed to a step of this session that has not ended yet
        (0 if none). Such a notice is consumed even though ``delivered_step`` is still NULL: a family
        that withdraws an unconsumed notice (an inline read superseding a queued callback) must
        treat it as delivered. Call it inside ``transaction()`` to be atomic with take_notices."""
        with self._lock:
            return max((seq for (sid, _n), seq in self._deliver_on_end.items() if sid == session_id), default=0)

    # -- artifacts and read receipts ------------------------------------------------------------

    def record_artifact(
        self, session_id: str, call_seq: int | None, path: str, kind: str, size: int, sha256: str
    ) -> None:
        self.execute(
            "INSERT OR REPLACE INTO artifacts (session_id, call_seq, path, kind, size, sha256, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, call_seq, path, kind, size, sha256, time.time()),
        )

    def artifact(self, path: str) -> sqlite3.Row | None:
        rows = self.query("SELECT * FROM artifacts WHERE path = ?", (path,))
        return rows[0] if rows else None

    def put_read_receipt(
        self, session_id: str, path: str, sha256: str, size: int, mtime_ns: int, call_seq: int | None
    ) -> int:
        """Record that this session has seen exactly these bytes at path; returns the generation.

        The receipt rides with the session's next transaction — normally the settle of the call that
        read the file — so it becomes durable together with the result that showed those bytes, at no
        commit of its own. Until then read_receipt() answers from memory (a session has one driver),
        and the driver remembers the generations it wrote."""
        with self._lock:
            key = (session_id, path)
            pending = self._pending_receipts.get(key)
            if pending is not None:
                generation = int(pending["generation"]) + 1
            else:
                known = self._generations.get(key)
                if known is None:
                    row = self._db.execute(RECEIPT_GENERATION, key).fetchone()
                    known = int(row[0]) if row else 0
                generation = known + 1
            self._pending_receipts[key] = {
                "session_id": session_id,
                "path": path,
                "sha256": sha256,
                "size": size,
                "mtime_ns": mtime_ns,
                "generation": generation,
                "call_seq": call_seq,
                "at": time.time(),
            }
        return generation

    def _flush_pending_receipts(self, db: sqlite3.Connection) -> None:
        rows = [
            (r["session_id"], r["path"], r["sha256"], r["size"], r["mtime_ns"], r["generation"], r["call_seq"], r["at"])
            for r in self._pending_receipts.values()
        ]
        if len(rows) == 1:
            db.execute(PUT_RECEIPT, rows[0])
        elif rows:
            db.executemany(PUT_RECEIPT, rows)

    def _remember_receipts(self) -> None:
        """After the commit that wrote the pending receipts: keep their generations (driven sessions)."""
        if len(self._generations) + len(self._pending_receipts) > MEMO_ENTRIES:
            self._generations.clear()
        for key, r in self._pending_receipts.items():
            if self._held(key[0]):
                self._generations[key] = int(r["generation"])

    def read_receipt(self, session_id: str, path: str) -> Any:
        """The session's receipt for path (a mapping with sha256, size, mtime_ns, generation), or None."""
        with self._lock:
            pending = self._pending_receipts.get((session_id, path))
            if pending is not None:
                return dict(pending)
            rows = self.query("SELECT * FROM read_receipts WHERE session_id = ? AND path = ?", (session_id, path))
        return rows[0] if rows else None

    def drop_read_receipt(self, session_id: str, path: str) -> None:
        with self._lock:
            self._pending_receipts.pop((session_id, path), None)
            self._generations.pop((session_id, path), None)
            self.execute("DELETE FROM read_receipts WHERE session_id = ? AND path = ?", (session_id, path))

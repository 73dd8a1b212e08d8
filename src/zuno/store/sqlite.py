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
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zuno.store.calls import CallEntry, as_text, dumps
from zuno.store.locks import hold_lock_file, release_lock_file
from zuno.store.paths import StoreUnusable, check_store_path
from zuno.store.schema import MIGRATIONS

WAL_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 64 << 20
# Call numbers (calls.seq) are reserved this many at a time, in one commit, so a call knows its
# number before it runs without a commit of its own (a Safe call has no intent row).
CALL_SEQ_BLOCK = 256
# The synchronous level of the transaction that commits Never calls' intents: FULL fsyncs the WAL
# at that commit, so an intent survives a power loss, not only a crash of the process.
INTENT_SYNCHRONOUS = "FULL"


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
        self._last_step: dict[str, int] = {}
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
            self._db.execute("BEGIN IMMEDIATE")
            flushed = bool(self._pending_steps or self._pending_receipts)
            try:
                self._flush_pending_steps(self._db)
                self._flush_pending_receipts(self._db)
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            if flushed:
                self._pending_steps.clear()
                self._pending_receipts.clear()

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
        db.execute(
            "INSERT INTO events (session_id, step, call_seq, call_id, kind, data, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, step, call_seq, call_id, kind, _dumps(data or {}), time.time()),
        )

    def applied_migrations(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT name FROM schema_migrations ORDER BY rowid")]

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """One committed statement, for tool families that keep their own tables."""
        with self._lock:
            if self._pending_steps or self._pending_receipts:
                with self.transaction() as db:
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
                with self.transaction():
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
        held = self._session_locks.pop(session_id, None)
        self._last_step.pop(session_id, None)
        if held is not None:
            release_lock_file(*held)

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
            "SELECT s.id, s.root, s.profile, s.created_at, s.last_step,"
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
                (n,) = self._db.execute("SELECT last_step + 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
            else:  # this process drives the session: it numbered its last step itself
                n = last + 1
            pending = self._pending_steps.get(session_id)
            if pending is not None:  # a previous step of this session wrote nothing: it still takes its number
                n = max(n, pending[0] + 1)
                with self.transaction():
                    pass
            self._pending_steps[session_id] = (int(n), event, time.time())
            self._last_step[session_id] = int(n)
        return int(n)

    def _flush_pending_steps(self, db: sqlite3.Connection) -> None:
        for session_id, (n, event, started_at) in list(self._pending_steps.items()):
            db.execute("UPDATE sessions SET last_step = ? WHERE id = ?", (n, session_id))
            db.execute("INSERT INTO steps (session_id, n, started_at) VALUES (?, ?, ?)", (session_id, n, started_at))
            self._event(db, session_id, "step-started", event, n, None, None)

    def end_step(self, session_id: str, n: int) -> None:
        with self.transaction() as db:
            self._end_step(db, session_id, n)

    def _end_step(self, db: sqlite3.Connection, session_id: str, n: int) -> None:
        db.execute("UPDATE steps SET ended_at = ? WHERE session_id = ? AND n = ?", (time.time(), session_id, n))
        upto = self._deliver_on_end.pop((session_id, n), None)
        if upto is not None:
            db.execute(
                "UPDATE notices SET delivered_step = ? WHERE session_id = ? AND delivered_step IS NULL AND seq <= ?",
                (n, session_id, upto),
            )
        self._event(db, session_id, "step-ended", None, n, None, None)

    # -- calls ----------------------------------------------------------------------------------

    def next_call_seq(self) -> int:
        """The number of the next call of this process. Numbers are reserved in blocks (one commit
        per CALL_SEQ_BLOCK calls, raising the table's AUTOINCREMENT counter), so another process
        using this database never takes one of them."""
        with self._lock:
            if self._seq_next >= self._seq_end:
                with self.transaction() as db:
                    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'calls'").fetchone()
                    (top,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM calls").fetchone()
                    top = max(int(top), int(row[0]) if row else 0)
                    bump = (
                        "INSERT INTO sqlite_sequence (seq, name) VALUES (?, 'calls')"
                        if row is None
                        else "UPDATE sqlite_sequence SET seq = ? WHERE name = 'calls'"
                    )
                    db.execute(bump, (top + CALL_SEQ_BLOCK,))
                self._seq_next, self._seq_end = top + 1, top + 1 + CALL_SEQ_BLOCK
            seq = self._seq_next
            self._seq_next += 1
            return seq

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
                with self.transaction() as db:
                    for e in entries:
                        e.write_intent(db)
            finally:
                if full:
                    self._db.execute("PRAGMA synchronous=NORMAL")
            for e in entries:
                e.intent_written = True

    def write_settlements(self, entries: list[CallEntry], end_step: tuple[str, int] | None = None) -> None:
        """Write these calls' results (in the given order) and, with ``end_step``, the end of that
        step, in one transaction. An entry without an intent row is inserted settled."""
        with self._lock:
            for e in entries:
                if not e.seq:
                    e.seq = self.next_call_seq()
            with self.transaction() as db:
                for e in entries:
                    e.write_settlement(db)
                if end_step is not None:
                    self._end_step(db, end_step[0], end_step[1])

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
        end_step: int | None = None,
    ) -> None:
        """Write a call's result, and (optionally) its event and the end of its step, in one transaction."""
        with self.transaction() as db:
            db.execute(
                "UPDATE calls SET state = 'settled', outcome = ?, block_kind = ?, cancelled = ?, text = ?,"
                " metadata = ?, started_at = ?, ended_at = ? WHERE seq = ?",
                (outcome, block_kind, int(cancelled), _text(text), _dumps(metadata), started_at, ended_at, seq),
            )
            if event is not None or end_step is not None:
                row = db.execute("SELECT session_id, step, call_id FROM calls WHERE seq = ?", (seq,)).fetchone()
                if event is not None:
                    self._event(db, row[0], event[0], event[1], row[1], seq, row[2])
                if end_step is not None:
                    self._end_step(db, row[0], end_step)

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
        cur = self.execute(
            "INSERT INTO events (session_id, step, call_seq, call_id, kind, data, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, step, call_seq, call_id, kind, _dumps(data or {}), time.time()),
        )
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
        cur = self.execute(
            "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, ?, ?, ?, ?)",
            (session_id, kind, text, _dumps(data or {}), time.time()),
        )
        return int(cur.lastrowid or 0)

    def take_notices(self, session_id: str, step: int, running: Collection[int] = ()) -> list[dict[str, Any]]:
        """The pending notices of the session, for this step. They are marked delivered in the
        transaction that ends the step, so a step that dies before it ends delivers them again
        with the next one: a notice may be seen twice, never lost. ``running``: the other steps of
        the session still in progress in this process, whose notices are theirs."""
        with self._lock:  # atomic with notices_in_flight() readers (a completion claimed exactly once)
            # A notice already handed to another step of this session that is still running (steps run
            # concurrently when an MCP client sends requests together) is that step's: not handed twice.
            floor = max((self._deliver_on_end.get((session_id, m), 0) for m in running), default=0)
            rows = self.query(
                "SELECT * FROM notices WHERE session_id = ? AND delivered_step IS NULL AND seq > ? ORDER BY seq",
                (session_id, floor),
            )
            if rows:
                self._deliver_on_end[(session_id, step)] = rows[-1]["seq"]
        return [{"kind": r["kind"], "text": r["text"], **json.loads(r["data"])} for r in rows]

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
        commit of its own. Until then read_receipt() answers from memory (a session has one driver)."""
        with self._lock:
            key = (session_id, path)
            pending = self._pending_receipts.get(key)
            if pending is not None:
                generation = int(pending["generation"]) + 1
            else:
                row = self._db.execute(
                    "SELECT generation FROM read_receipts WHERE session_id = ? AND path = ?", key
                ).fetchone()
                generation = (int(row[0]) if row else 0) + 1
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
        for r in self._pending_receipts.values():
            db.execute(
                "INSERT OR REPLACE INTO read_receipts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    r["session_id"],
                    r["path"],
                    r["sha256"],
                    r["size"],
                    r["mtime_ns"],
                    r["generation"],
                    r["call_seq"],
                    r["at"],
                ),
            )

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
            self.execute("DELETE FROM read_receipts WHERE session_id = ? AND path = ?", (session_id, path))

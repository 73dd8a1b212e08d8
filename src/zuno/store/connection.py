"""The store's SQLite connection: opened in WAL mode with the store's pragmas and migrated, or
opened read-only; closed with a checkpoint.

The connection is opened in autocommit mode (``isolation_level=None``): the store begins and
commits every transaction itself (``zuno.store.transaction``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from zuno.store.paths import StoreUnusable, check_store_path

WAL_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 64 << 20
BUSY_TIMEOUT_MS = 30_000  # read at each open (a test shortens it)


def locked_text(path: Path, waited_ms: int) -> str:
    """The store at ``path`` stayed locked by another process for the whole busy wait: the same
    words at open time and mid-use."""
    return (
        f"store {path} is locked by another process: it stayed locked for the whole "
        f"{_seconds(waited_ms)} Zuno waits (a program holding a transaction open on it)"
    )


def _seconds(ms: int) -> str:
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms / 1000:g} s"


def is_locked(e: BaseException) -> bool:
    """Is this SQLite error SQLITE_BUSY / SQLITE_LOCKED (another connection holds the lock)?"""
    return isinstance(e, sqlite3.OperationalError) and (
        ((getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )


class StoreLocked(StoreUnusable, sqlite3.OperationalError):
    """A statement on Zuno's own store connection found the store locked by another process for
    the whole busy wait. Raised by that connection only (``StoreConnection``), never made from an
    error's text, so a tool's own SQLite database being locked is never taken for the store.

    ``done`` says what became of the work that needed the write (the store facade adds it for the
    writes of calls: which calls ran, what their records are now, what the next start does);
    ``ran``: a call ran whose result could not be recorded. Still a ``sqlite3.OperationalError``
    (code SQLITE_BUSY), so a caller that handles SQLite errors handles this one."""

    def __init__(self, path: Path, waited_ms: int, done: str = "", *, ran: bool = False) -> None:
        self.path = path
        self.waited_ms = waited_ms
        self.done = done
        self.ran = ran
        self.sqlite_errorcode = sqlite3.SQLITE_BUSY
        self.sqlite_errorname = "SQLITE_BUSY"
        super().__init__(str(self))

    def __str__(self) -> str:
        done = f" {self.done}" if self.done else " Nothing was written."
        return f"{locked_text(self.path, self.waited_ms)}.{done} Let that program finish (or end it), then go on."

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.waited_ms, self.done), {"ran": self.ran})

    def having(self, done: str, *, ran: bool = False) -> StoreLocked:
        """The same lock, saying what became of the work that needed the write."""
        return StoreLocked(self.path, self.waited_ms, done, ran=ran)


class StoreConnection(sqlite3.Connection):
    """Zuno's connection to its store: a statement that finds the store locked by another process
    (SQLITE_BUSY / SQLITE_LOCKED after the busy wait) raises ``StoreLocked`` naming the file. Only
    statements run on this connection are mapped: an error from any other database passes as it is."""

    store_path: Path = Path()
    busy_ms: int = BUSY_TIMEOUT_MS

    # A statement found the store locked for a whole busy wait, and no statement since showed the
    # write lock free again (a write that changed rows, or one run in a transaction: BEGIN
    # IMMEDIATE took the lock). A read does not clear it: in WAL mode reads go on while another
    # process holds the write lock.
    locked_out = False

    def _run(self, method: Callable[..., sqlite3.Cursor], *args: Any) -> sqlite3.Cursor:
        """One of sqlite3.Connection's statement methods, a lock it met mapped (``_mapped``)."""
        changes = self.total_changes
        try:
            cur = method(self, *args)
        except sqlite3.OperationalError as e:
            raise self._mapped(e) from None
        if self.locked_out and (self.in_transaction or self.total_changes != changes):
            self.locked_out = False
        return cur

    def execute(self, *args: Any) -> sqlite3.Cursor:
        return self._run(sqlite3.Connection.execute, *args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        return self._run(sqlite3.Connection.executemany, *args)

    def executescript(self, *args: Any) -> sqlite3.Cursor:
        return self._run(sqlite3.Connection.executescript, *args)

    def _mapped(self, e: sqlite3.OperationalError) -> sqlite3.OperationalError:
        if not is_locked(e):
            return e
        self.locked_out = True
        return StoreLocked(self.store_path, self.busy_ms)

    @contextlib.contextmanager
    def waiting(self, ms: int) -> Iterator[None]:
        """The busy wait set to ``ms`` for the statements of the block (``locked_out`` untouched)."""
        sqlite3.Connection.execute(self, f"PRAGMA busy_timeout={ms}")
        try:
            yield
        finally:
            sqlite3.Connection.execute(self, f"PRAGMA busy_timeout={self.busy_ms}")


def _connect(target: str, path: Path, *, uri: bool = False) -> StoreConnection:
    busy = BUSY_TIMEOUT_MS
    db = sqlite3.connect(
        target, uri=uri, isolation_level=None, check_same_thread=False, timeout=busy / 1000, factory=StoreConnection
    )
    assert isinstance(db, StoreConnection)
    db.store_path = path
    db.busy_ms = busy
    return db


def open_db(path: Path, migrations: list[tuple[str, str]], *, readonly: bool) -> sqlite3.Connection:
    """The connection to the store at ``path``. With ``readonly`` an existing database is opened
    for reading only (nothing created or migrated); otherwise it is created when missing (in a
    directory that must exist) and migrated. StoreUnusable names what is wrong with the file."""
    exists = check_store_path(path, create=not readonly)
    if readonly and not exists:
        raise StoreUnusable(f"store {path} does not exist.")
    db: sqlite3.Connection | None = None
    try:
        if readonly:
            db = _connect(f"{path.absolute().as_uri()}?mode=ro", path, uri=True)
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout={db.busy_ms}")
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        db = _connect(str(path), path)
        _configure(db)
        migrate(db, migrations)
        return db
    except sqlite3.DatabaseError as e:
        if db is not None:
            with contextlib.suppress(Exception):
                db.close()
        if isinstance(e, StoreLocked) or is_locked(e):
            raise StoreUnusable(
                f"{locked_text(path, BUSY_TIMEOUT_MS)}. Let that program finish, or name another file with --db."
            ) from None
        raise StoreUnusable(
            f"store {path} cannot be used as a SQLite database ({e}). Name another file with --db."
        ) from None


def _configure(db: StoreConnection) -> None:
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute(f"PRAGMA busy_timeout={db.busy_ms}")
    # Commits in WAL mode with synchronous=NORMAL do not fsync; checkpoints do. Checkpointing every
    # ~40 MB of WAL instead of every 4 MB keeps those fsyncs off the per-call path (about 10% of a
    # durable call); the WAL is truncated back after a checkpoint, and checkpointed on close.
    db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")


def migrate(db: sqlite3.Connection, migrations: list[tuple[str, str]]) -> None:
    """Apply, in one transaction, the migrations not applied yet, in list order."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        done = {r[0] for r in db.execute("SELECT name FROM schema_migrations")}
        for name, sql in migrations:
            if name in done:
                continue
            for statement in (s.strip() for s in sql.split(";")):
                if statement:
                    db.execute(statement)
            db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def applied_migrations(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM schema_migrations ORDER BY rowid")]


def checkpoint_and_close(db: sqlite3.Connection) -> None:
    # If another process holds the database busy, its own close checkpoints.
    with contextlib.suppress(sqlite3.Error):
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    db.close()

"""The store's SQLite connection: opened in WAL mode with the store's pragmas and migrated, or
opened read-only; closed with a checkpoint.

The connection is opened in autocommit mode (``isolation_level=None``): the store begins and
commits every transaction itself (``zuno.store.transaction``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

from zuno.store.paths import StoreUnusable, check_store_path

WAL_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 64 << 20
BUSY_TIMEOUT_MS = 30_000


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
            db = sqlite3.connect(
                f"{path.absolute().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
            )
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        _configure(db)
        migrate(db, migrations)
        return db
    except sqlite3.DatabaseError as e:
        if db is not None:
            with contextlib.suppress(Exception):
                db.close()
        if ((getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise StoreUnusable(
                f"store {path} is locked by another process: it stayed locked for the whole "
                f"{BUSY_TIMEOUT_MS // 1000} s Zuno waits (a program holding a transaction open on it). "
                "Let that program finish, or name another file with --db."
            ) from None
        raise StoreUnusable(
            f"store {path} cannot be used as a SQLite database ({e}). Name another file with --db."
        ) from None


def _configure(db: sqlite3.Connection) -> None:
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
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

"""The store's transactions on its one connection.

Every write is its own committed transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on
any error), so a fact is durable the moment the method that wrote it returns. Some rows wait in
memory for the next transaction instead of taking a commit of their own (a step's row until the
step's first durable fact, a read receipt until the settle of the call that read the file): their
holders are the ``riders`` of the transactions, and their rows are written first in whichever
transaction comes next. The event rows a transaction's body appends are written together, in one
statement, just before its commit.

The connection is read from ``db`` at each use (never kept elsewhere), so a caller may swap it
for a wrapper that records the statements (the agent-loop benchmark does).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sized
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, Protocol

from zuno.store.calls import INSERT_EVENT
from zuno.store.connection import StoreLocked

# What a session's driver keeps in memory of its own writes, so a call needs no query for them
# (the attempt number of each (tool, arguments), the generation of each read receipt). Entries past
# this many are forgotten (the next one is read from the database again).
MEMO_ENTRIES = 4096

Events = list[tuple[Any, ...]]


class Rider(Protocol):
    """Rows kept in memory until the next transaction, written first in it."""

    @property
    def pending(self) -> Sized: ...

    def flush(self, db: sqlite3.Connection, events: Events, ending: tuple[str, int] | None) -> None:
        """Write the pending rows (a step that also ends in this transaction is ``ending``)."""

    def committed(self) -> None:
        """The transaction that wrote the pending rows committed: they are no longer pending."""


# The busy wait of a write that follows a lock met for a whole busy wait: short, so another
# process's own short write at that very moment is waited for, not reported as the lock.
AFTER_LOCK_MS = 100


def once_if_locked(db: sqlite3.Connection) -> AbstractContextManager[None]:
    """The busy wait for a write: a short one (``AFTER_LOCK_MS``) when the store's last statement
    already found it locked by another process for a whole busy wait (``StoreConnection.locked_out``),
    so a write that follows (the settle of a call whose tool met the lock, the run's own records,
    the close) does not wait the whole busy wait again: one busy wait per lock, then the lock is
    reported. None at all after a wait a signal ended (``interrupted``: the user stops waiting). The
    full wait otherwise (and again once a write went through: the lock was gone)."""
    waiting = getattr(db, "waiting", None)  # (a wrapper recording the statements may have none)
    if waiting is None or not getattr(db, "locked_out", False):
        return nullcontext()
    return waiting(0 if getattr(db, "interrupted", None) is not None else AFTER_LOCK_MS)


def write_events(db: sqlite3.Connection, events: Events) -> None:
    if len(events) == 1:
        db.execute(INSERT_EVENT, events[0])
    elif events:
        db.executemany(INSERT_EVENT, events)
    events.clear()


class Transactions:
    """The connection, the lock every use of it takes, and the sessions this process drives
    (``held``: session id -> its lock file; a session has one driver, so what the driver wrote
    is known without a query)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.lock = threading.RLock()
        self.held: dict[str, tuple[int, Path]] = {}
        self.riders: tuple[Rider, ...] = ()

    @contextmanager
    def begin(self, ending: tuple[str, int] | None = None) -> Iterator[tuple[sqlite3.Connection, Events]]:
        """One transaction: the riders' pending rows go first (a step that also ends in it,
        ``ending``, is written ended); the event rows the body appends are written together
        (``write_events``) before the commit."""
        with self.lock:
            db = self.db
            with once_if_locked(db):
                db.execute("BEGIN IMMEDIATE")
            flushed: list[Rider] = []
            for r in self.riders:
                if r.pending:
                    flushed.append(r)
            events: Events = []
            try:
                for r in flushed:
                    r.flush(db, events, ending)
                yield db, events
                write_events(db, events)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            for r in flushed:
                r.committed()

    @contextmanager
    def best_effort(self) -> Iterator[None]:
        """Writes that may be left out (what closing a session or the store writes): a store another
        process keeps locked skips them rather than failing the close. When the last statement
        already found it locked, they try once without waiting (``once_if_locked``)."""
        with self.lock, once_if_locked(self.db), suppress(StoreLocked):
            yield

    def pending(self) -> bool:
        for r in self.riders:
            if r.pending:
                return True
        return False

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """One committed statement (in a transaction of its own when rows are pending, after them)."""
        with self.lock:
            if self.pending():
                with self.begin() as (db, events):
                    write_events(db, events)  # the step's first events come before this statement
                    return db.execute(sql, params)
            with once_if_locked(self.db):
                return self.db.execute(sql, params)

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self.lock:
            return list(self.db.execute(sql, params))

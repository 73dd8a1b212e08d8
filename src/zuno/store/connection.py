"""The store's SQLite connection: opened in WAL mode with the store's pragmas and migrated, or
opened read-only; closed with a checkpoint.

The connection is opened in autocommit mode (``isolation_level=None``): the store begins and
commits every transaction itself (``zuno.store.transaction``).

The busy wait for a lock another process holds is spent in slices: a statement is first tried
without waiting, and when it meets the lock, SQLite waits ``SLICE_MS`` at a time and the statement
is tried again until the whole wait (``BUSY_TIMEOUT_MS``) is spent. Between tries a signal is
handled (the wait runs on the event loop's thread, where a handler that only wakes the loop would
otherwise run after the whole wait): a SIGINT or SIGTERM that comes during the wait, its first
slice included, ends it (``StoreWaitInterrupted``), its handler having run as usual. So does one
that came just before the wait, when its handler's effect waits for the event loop
(``defer_to_loop``): the wait keeps the loop from running, so it would otherwise run to its end
first.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.store.paths import StoreUnusable, check_store_path

if TYPE_CHECKING:
    import asyncio

WAL_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 64 << 20
BUSY_TIMEOUT_MS = 30_000  # read at each open (a test shortens it)
# One SQLite busy wait: the statement is tried again after each until the whole wait is spent, so a
# signal is handled within this long. (The first try of a statement does not wait at all: the
# whole wait is spent with the handler that notes a signal installed.)
SLICE_MS = 25
WAIT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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


class StoreWaitInterrupted(StoreLocked):
    """The busy wait for a lock another process holds was ended by a signal (``signum``: SIGINT for
    Ctrl-C, SIGTERM) after ``waited_ms``; the handler of that signal ran as usual (it cancels the
    step). What became of the work is said as for ``StoreLocked``; a command exits with the status
    of the signal (130 for Ctrl-C)."""

    def __init__(
        self, path: Path, waited_ms: int, done: str = "", *, ran: bool = False, signum: int = signal.SIGINT
    ) -> None:
        self.signum = signum
        super().__init__(path, waited_ms, done, ran=ran)

    def __str__(self) -> str:
        done = f" {self.done}" if self.done else " Nothing was written."
        why = "interrupted" if self.signum == signal.SIGINT else f"{signal.Signals(self.signum).name} came"
        return (
            f"store {self.path} is locked by another process: Zuno stopped waiting for it after "
            f"{_seconds(self.waited_ms)} ({why}).{done} Let that program finish (or end it), then go on."
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.waited_ms, self.done), {"ran": self.ran, "signum": self.signum})

    def having(self, done: str, *, ran: bool = False) -> StoreLocked:
        return StoreWaitInterrupted(self.path, self.waited_ms, done, ran=ran, signum=self.signum)


# The SIGINT / SIGTERM whose handler ran but whose effect (a callback it scheduled) waits for the
# event loop to run again: a store wait on the loop's thread ends at once while one is here.
_deferred: list[int] = []


def defer_to_loop(
    loop: asyncio.AbstractEventLoop, handler: Callable[[int, Any], Any] | None = None
) -> Callable[[int, Any], Any]:
    """A Python-level handler of a stop signal whose effect ``loop`` carries out (``handler``,
    chained, schedules it; None: the loop's own ``add_signal_handler`` callback, reached through its
    wakeup descriptor, does). It notes the signal until the loop runs again (``deferred``): a store
    wait on the loop's thread, which keeps the loop from running, ends at once, even one that began
    after the signal or in whose first slice the signal came."""

    def handle(signum: int, frame: Any) -> None:
        note_deferred(signum, loop)
        if handler is not None:
            handler(signum, frame)

    return handle


def add_deferring_handler(
    loop: asyncio.AbstractEventLoop, signum: int, callback: Callable[..., object], *args: Any
) -> None:
    """``loop.add_signal_handler(signum, callback, *args)``, its Python-level handler (which does
    nothing: the callback runs from the loop's wakeup descriptor) replaced by ``defer_to_loop``'s,
    so a store wait that keeps the loop from running ends at once. Raises as add_signal_handler."""
    loop.add_signal_handler(signum, callback, *args)
    signal.signal(signum, defer_to_loop(loop))


def note_deferred(signum: int, loop: asyncio.AbstractEventLoop) -> None:
    """A stop signal came whose effect waits for ``loop``: noted until the loop runs again."""
    _deferred.append(signum)
    with contextlib.suppress(RuntimeError):  # (a closed loop never runs its callbacks: nothing waits)
        loop.call_soon_threadsafe(_deferred.clear)


def deferred() -> int | None:
    """The stop signal noted by ``note_deferred`` that the event loop has not run since, or None."""
    return _deferred[0] if _deferred else None


@contextlib.contextmanager
def _signals_noted() -> Iterator[list[int]]:
    """The SIGINT / SIGTERM that come during the block, noted (their handlers run too, as before:
    one that raises, as Python's default SIGINT handler does, ends the block with its exception).
    Only in the main thread, where signal handlers run; a signal whose handler is not a Python
    function (ignored, or the default action) is left alone."""
    noted: list[int] = []
    before: dict[int, Callable[[int, Any], Any]] = {}

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)
        before[signum](signum, frame)

    if threading.current_thread() is threading.main_thread():
        for sig in WAIT_SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler):
                with contextlib.suppress(ValueError):
                    signal.signal(sig, note)
                    before[sig] = handler
    try:
        yield noted
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


class StoreConnection(sqlite3.Connection):
    """Zuno's connection to its store: a statement that finds the store locked by another process
    (SQLITE_BUSY / SQLITE_LOCKED after the busy wait) raises ``StoreLocked`` naming the file. Only
    statements run on this connection are mapped: an error from any other database passes as it is.

    A statement is first tried without waiting; one that meets the lock spends the busy wait in
    slices (``SLICE_MS`` in SQLite, then the statement tried again, until ``busy_ms``, or the
    block's ``waiting(ms)``, is spent), so a signal is handled during it. Only a statement that can
    be tried again is: one outside a transaction (BEGIN, an autocommit statement) and COMMIT; any
    other inside a transaction is mapped at once, and ``executemany`` / ``executescript`` outside
    one wait the whole wait in SQLite (a retry could repeat a part)."""

    store_path: Path = Path()
    busy_ms: int = BUSY_TIMEOUT_MS
    wait_ms: int | None = None  # the whole wait of the statements of a ``waiting(ms)`` block

    # A statement found the store locked for a whole busy wait, and no statement since showed the
    # write lock free again (a write that changed rows, or one run in a transaction: BEGIN
    # IMMEDIATE took the lock). A read does not clear it: in WAL mode reads go on while another
    # process holds the write lock. A wait a signal ended sets it too, and is ``interrupted``:
    # a lock met again before the lock was free is reported as that interrupted wait.
    locked_out = False
    interrupted: StoreWaitInterrupted | None = None

    def _run(self, method: Callable[..., sqlite3.Cursor], *args: Any, again: bool = True) -> sqlite3.Cursor:
        """One of sqlite3.Connection's statement methods, tried without waiting (the connection's
        busy timeout is 0 outside ``_waited``); a lock it met is waited for in slices (``_waited``;
        ``again``: the statement may be tried again) or mapped (``_mapped``)."""
        changes = self.total_changes
        again = again and not self.in_transaction
        began = time.monotonic()
        try:
            cur = method(self, *args)
        except sqlite3.OperationalError as e:
            if not is_locked(e) or not (again or _is_commit(args)):
                raise self._mapped(e) from None
            cur = self._waited(method, args, began)
        if self.locked_out and (self.in_transaction or self.total_changes != changes):
            self.locked_out = False
            self.interrupted = None
        return cur

    def _waited(self, method: Callable[..., sqlite3.Cursor], args: tuple[Any, ...], began: float) -> sqlite3.Cursor:
        """The statement tried again, a slice of busy wait at a time, until the whole wait since
        ``began`` is spent (``StoreLocked``) or a signal comes (``StoreWaitInterrupted``)."""
        whole = self._whole_ms()
        deadline = began + whole / 1000
        if time.monotonic() >= deadline:  # (a wait of 0: tried once)
            raise self._locked()
        try:
            with _signals_noted() as noted:
                while not noted and deferred() is None and (left := deadline - time.monotonic()) > 0:
                    slice_ms = max(1, min(SLICE_MS, int(left * 1000)))
                    self._busy_timeout(slice_ms)
                    try:
                        return method(self, *args)
                    except sqlite3.OperationalError as e:
                        if not is_locked(e):
                            raise self._mapped(e) from None
            if (signum := noted[0] if noted else deferred()) is not None:
                waited = int((time.monotonic() - began) * 1000)
                self.interrupted = StoreWaitInterrupted(self.store_path, waited, signum=signum)
                raise self.interrupted.having("")
            raise self._locked()
        except BaseException as e:
            if not isinstance(e, sqlite3.Error) or is_locked(e):  # (a handler's own, as KeyboardInterrupt, too)
                self.locked_out = True
            raise
        finally:
            self._busy_timeout(0)

    def _whole_ms(self) -> int:
        return self.busy_ms if self.wait_ms is None else self.wait_ms

    def _busy_timeout(self, ms: int) -> None:
        sqlite3.Connection.execute(self, f"PRAGMA busy_timeout={ms}")

    def execute(self, *args: Any) -> sqlite3.Cursor:
        return self._run(sqlite3.Connection.execute, *args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        return self._whole(sqlite3.Connection.executemany, *args)

    def executescript(self, *args: Any) -> sqlite3.Cursor:
        return self._whole(sqlite3.Connection.executescript, *args)

    def _whole(self, method: Callable[..., sqlite3.Cursor], *args: Any) -> sqlite3.Cursor:
        """Statements that a retry could run twice in part: outside a transaction, the whole wait in
        SQLite (as before the slices); inside one (where the write lock is held), as they are."""
        if self.in_transaction:
            return self._run(method, *args)
        whole = self._whole_ms()
        self._busy_timeout(whole)
        try:
            return self._run(method, *args, again=False)
        finally:
            self._busy_timeout(0)

    def _mapped(self, e: sqlite3.OperationalError) -> sqlite3.OperationalError:
        return self._locked() if is_locked(e) else e

    def _locked(self) -> StoreLocked:
        """The lock met, for the whole wait (or as the wait a signal ended, not yet over)."""
        self.locked_out = True
        if self.interrupted is not None:
            return self.interrupted.having("")
        return StoreLocked(self.store_path, self.busy_ms)

    @contextlib.contextmanager
    def waiting(self, ms: int) -> Iterator[None]:
        """The busy wait set to ``ms`` for the statements of the block (``locked_out`` untouched)."""
        self.wait_ms = ms
        try:
            yield
        finally:
            self.wait_ms = None


def _is_commit(args: tuple[Any, ...]) -> bool:
    return bool(args) and isinstance(args[0], str) and args[0].strip().upper().startswith(("COMMIT", "END"))


def _connect(target: str, path: Path, *, uri: bool = False) -> StoreConnection:
    busy = BUSY_TIMEOUT_MS
    db = sqlite3.connect(
        target,
        uri=uri,
        isolation_level=None,
        check_same_thread=False,
        timeout=0,  # (each statement is tried first without waiting: ``StoreConnection._run``)
        factory=StoreConnection,
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
        if isinstance(e, StoreWaitInterrupted):
            raise  # (its own words: how long Zuno waited before the signal came)
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

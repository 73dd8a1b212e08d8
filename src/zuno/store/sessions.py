"""A session's row, and the lock of the one process that drives it.

A session is driven by one process at a time, held by an advisory file lock that the kernel
releases when the holder dies (so a kill -9 never leaves a session stuck); the lock file is removed
again on release (``zuno.store.locks``), so the locks directory does not grow.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from zuno.session_ids import SessionOfAnotherWorkspace
from zuno.store.locks import hold_lock_file, release_lock_file
from zuno.store.transaction import Transactions

INSERT_SESSION = "INSERT OR IGNORE INTO sessions (id, created_at, root, profile) VALUES (?, ?, ?, ?)"


class SessionBusy(Exception):
    """Another process is driving this session."""


class Sessions:
    """The sessions of the store at ``tx``; their lock files live in ``locks_dir`` (made when first
    needed). The sessions this process holds are ``tx.held``."""

    def __init__(self, tx: Transactions, locks_dir: Path) -> None:
        self._tx = tx
        self._locks_dir = locks_dir

    def ensure(self, session_id: str | None, root: str, profile: str, db: object = "") -> str:
        """The session, made when new; one of another workspace root (a store shared with --db) is
        ``SessionOfAnotherWorkspace``, and nothing is written."""
        sid = session_id or f"ses_{uuid.uuid4().hex[:16]}"
        with self._tx.lock:
            if session_id is not None:
                rows = self._tx.query("SELECT root FROM sessions WHERE id = ?", (sid,))
                if rows and str(rows[0][0]) != root:
                    raise SessionOfAnotherWorkspace(sid, str(rows[0][0]), root, db)
            self._tx.db.execute(INSERT_SESSION, (sid, time.time(), root, profile))
        return sid

    def _lock_path(self, session_id: str) -> Path:
        safe = hashlib.sha256(session_id.encode()).hexdigest()[:24]
        self._locks_dir.mkdir(exist_ok=True)
        return self._locks_dir / f"session-{safe}.lock"

    def acquire(self, session_id: str) -> None:
        """Hold the session for this process; SessionBusy names the holder otherwise."""
        if session_id in self._tx.held:
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
        self._tx.held[session_id] = (fd, lp)

    def release(self, session_id: str, forget: Callable[[str], None]) -> None:
        """Let the session go: no longer held, then ``forget`` what is kept in memory of it (no
        longer kept from then on), then its lock file released and removed."""
        held = self._tx.held.pop(session_id, None)
        forget(session_id)
        if held is not None:
            release_lock_file(*held)

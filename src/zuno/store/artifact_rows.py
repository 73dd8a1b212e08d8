"""Artifact rows: that a file under ``.zuno/artifacts`` holds exactly these bytes (size, SHA-256),
saved for a call of a session.

A row rides with the store's next transaction (a rider, ``zuno.store.transaction``) — normally the
settle of the call that saved the file, whose result names it — so the row becomes durable together
with that result, at no commit of its own. The file's bytes are fsynced before the row is recorded
at all (``zuno.output.Artifacts.save``), so a process killed at any point never leaves a row naming
bytes that were not written. Until the row is written, ``artifact`` answers from memory.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from zuno.store.transaction import Events, Transactions

PUT_ARTIFACT = (
    "INSERT OR REPLACE INTO artifacts (session_id, call_seq, path, kind, size, sha256, created_at)"
    " VALUES (:session_id, :call_seq, :path, :kind, :size, :sha256, :created_at)"
)
READ_ARTIFACT = "SELECT * FROM artifacts WHERE path = ?"


class ArtifactRows:
    def __init__(self, tx: Transactions) -> None:
        self._tx = tx
        self._lock = tx.lock
        self.pending: dict[str, dict[str, Any]] = {}  # path -> the row to write (the last one recorded)

    def put(self, session_id: str, call_seq: int | None, path: str, kind: str, size: int, sha256: str) -> None:
        """Record the row (written with the next transaction; a later row for the path replaces it)."""
        with self._lock:
            self.pending.pop(path, None)  # (re-inserted last: rows are written in the order recorded)
            self.pending[path] = {
                "session_id": session_id,
                "call_seq": call_seq,
                "path": path,
                "kind": kind,
                "size": size,
                "sha256": sha256,
                "created_at": time.time(),
            }

    def flush(self, db: sqlite3.Connection, events: Events, ending: tuple[str, int] | None) -> None:
        rows = list(self.pending.values())
        if len(rows) == 1:
            db.execute(PUT_ARTIFACT, rows[0])
        elif rows:
            db.executemany(PUT_ARTIFACT, rows)

    def committed(self) -> None:
        self.pending.clear()

    def read(self, path: str) -> Any:
        """The row for path (a mapping with session_id, call_seq, kind, size, sha256, created_at), or None."""
        with self._lock:
            pending = self.pending.get(path)
            if pending is not None:
                return dict(pending)
            rows = self._tx.query(READ_ARTIFACT, (path,))
        return rows[0] if rows else None

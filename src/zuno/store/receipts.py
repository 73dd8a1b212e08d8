"""Read receipts: that a session has seen exactly these bytes at a path, with a generation that
grows with each new receipt for the path.

A receipt rides with the session's next transaction (it is a rider of the store's transactions,
``zuno.store.transaction``) — normally the settle of the call that read the file — so it becomes
durable together with the result that showed those bytes, at no commit of its own. Until then
``read`` answers from memory (a session has one driver), and the driver remembers the generations
it wrote.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from zuno.store.transaction import MEMO_ENTRIES, Events, Transactions

# An existing receipt is updated in place (its key is unchanged, so the key's index is not touched).
PUT_RECEIPT = (
    "INSERT INTO read_receipts (session_id, path, sha256, size, mtime_ns, generation, call_seq, at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, path) DO UPDATE SET sha256 = excluded.sha256,"
    " size = excluded.size, mtime_ns = excluded.mtime_ns, generation = excluded.generation,"
    " call_seq = excluded.call_seq, at = excluded.at"
)
RECEIPT_GENERATION = "SELECT generation FROM read_receipts WHERE session_id = ? AND path = ?"
READ_RECEIPT = "SELECT * FROM read_receipts WHERE session_id = ? AND path = ?"
DROP_RECEIPT = "DELETE FROM read_receipts WHERE session_id = ? AND path = ?"


class Receipts:
    def __init__(self, tx: Transactions) -> None:
        self._tx = tx
        self._lock = tx.lock
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}  # (session, path) -> the receipt to write
        self._generations: dict[tuple[str, str], int] = {}  # (session, path) -> generation (driven sessions)

    def put(self, session_id: str, path: str, sha256: str, size: int, mtime_ns: int, call_seq: int | None) -> int:
        """Record the receipt (written with the next transaction); returns its generation."""
        with self._lock:
            key = (session_id, path)
            pending = self.pending.get(key)
            if pending is not None:
                generation = int(pending["generation"]) + 1
            else:
                known = self._generations.get(key)
                if known is None:
                    row = self._tx.db.execute(RECEIPT_GENERATION, key).fetchone()
                    known = int(row[0]) if row else 0
                generation = known + 1
            self.pending[key] = {
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

    def flush(self, db: sqlite3.Connection, events: Events, ending: tuple[str, int] | None) -> None:
        rows = [
            (r["session_id"], r["path"], r["sha256"], r["size"], r["mtime_ns"], r["generation"], r["call_seq"], r["at"])
            for r in self.pending.values()
        ]
        if len(rows) == 1:
            db.execute(PUT_RECEIPT, rows[0])
        elif rows:
            db.executemany(PUT_RECEIPT, rows)

    def committed(self) -> None:
        """After the commit that wrote the pending receipts: keep their generations (driven sessions)."""
        if len(self._generations) + len(self.pending) > MEMO_ENTRIES:
            self._generations.clear()
        held = self._tx.held
        for key, r in self.pending.items():
            if key[0] in held:
                self._generations[key] = int(r["generation"])
        self.pending.clear()

    def read(self, session_id: str, path: str) -> Any:
        """The session's receipt for path (a mapping with sha256, size, mtime_ns, generation), or None."""
        with self._lock:
            pending = self.pending.get((session_id, path))
            if pending is not None:
                return dict(pending)
            rows = self._tx.query(READ_RECEIPT, (session_id, path))
        return rows[0] if rows else None

    def drop(self, session_id: str, path: str) -> None:
        with self._lock:
            self.pending.pop((session_id, path), None)
            self._generations.pop((session_id, path), None)
            self._tx.execute(DROP_RECEIPT, (session_id, path))

    def forget(self, session_id: str) -> None:
        for g in [g for g in self._generations if g[0] == session_id]:
            del self._generations[g]

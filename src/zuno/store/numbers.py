"""The numbers a process gives its calls (``calls.seq``) and agent requests (``agent_requests.id``)
before their rows exist, reserved in blocks: one commit per block raises the table's AUTOINCREMENT
counter, so another process using the database never takes one of them, and a call knows its
number before it runs without a commit of its own (a Safe call has no intent row)."""

from __future__ import annotations

from zuno.store.transaction import Transactions

CALL_SEQ_BLOCK = 256  # call numbers reserved at once
REQUEST_ID_BLOCK = 64  # agent request ids reserved at once


class Numbers:
    def __init__(self, tx: Transactions) -> None:
        self._tx = tx
        self._lock = tx.lock
        self._seq_next = self._seq_end = 0
        self._request_next = self._request_end = 0

    def next_call_seq(self) -> int:
        with self._lock:
            if self._seq_next >= self._seq_end:
                self._seq_next, self._seq_end = self._reserve("calls", "seq", CALL_SEQ_BLOCK)
            seq = self._seq_next
            self._seq_next += 1
            return seq

    def next_request_id(self) -> int:
        with self._lock:
            if self._request_next >= self._request_end:
                self._request_next, self._request_end = self._reserve("agent_requests", "id", REQUEST_ID_BLOCK)
            n = self._request_next
            self._request_next += 1
            return n

    def _reserve(self, table: str, column: str, block: int) -> tuple[int, int]:
        """Reserve the next ``block`` numbers of an AUTOINCREMENT table: [first, end)."""
        with self._tx.begin() as (db, _events):
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
            (top,) = self._tx.db.execute("SELECT COALESCE(MAX(seq), 0) FROM calls").fetchone()
            return int(top)

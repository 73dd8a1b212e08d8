"""The in-memory tail of a capture: the most recent bytes, held as a list of chunks.

A large read is kept as the very buffer it was read into (no copy: the capture path moves every
byte of a command's output, so one copy less is throughput); the buffer goes back to a small pool
when it leaves the tail. A small read is copied, so a chatty command does not pin a large buffer
per line. The tail holds at least ``keep`` bytes once that much was written, and at most ``keep``
plus one chunk.
"""

from __future__ import annotations

from collections import deque


class ChunkTail:
    def __init__(self, keep: int, chunk: int) -> None:
        self.keep = keep
        self.chunk = chunk
        self._chunks: deque[memoryview] = deque()
        self._owners: deque[bytearray | None] = deque()  # the pool buffer behind a chunk, if any
        self._len = 0
        self._pool: list[bytearray] = []

    def __len__(self) -> int:
        return self._len

    def buffer(self) -> bytearray:
        """A buffer of ``chunk`` bytes to read into (recycled when possible)."""
        return self._pool.pop() if self._pool else bytearray(self.chunk)

    def add_owned(self, buf: bytearray, n: int) -> None:
        """Keep buf[:n] without copying; buf belongs to the tail from now on."""
        self._push(memoryview(buf)[:n], buf)

    def add_copy(self, data: bytes | memoryview) -> None:
        self._push(memoryview(bytes(data)), None)

    def _push(self, view: memoryview, owner: bytearray | None) -> None:
        if not len(view):
            return
        self._chunks.append(view)
        self._owners.append(owner)
        self._len += len(view)
        while self._chunks and self._len - len(self._chunks[0]) >= self.keep:
            old = self._chunks.popleft()
            self._len -= len(old)
            owner = self._owners.popleft()
            old.release()
            if owner is not None and len(self._pool) < 4:
                self._pool.append(owner)

    def slice(self, start: int, end: int) -> bytes:
        """Bytes [start, end) counted from the first byte held."""
        out = bytearray()
        pos = 0
        for view in self._chunks:
            size = len(view)
            if pos + size > start and pos < end:
                out += view[max(0, start - pos) : min(size, end - pos)]
            pos += size
            if pos >= end:
                break
        return bytes(out)

    def clear(self) -> None:
        while self._chunks:
            self._chunks.popleft().release()
        self._owners.clear()
        self._len = 0
        self._pool.clear()

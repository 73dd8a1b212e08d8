"""The in-memory tail of a capture: the most recent bytes, held in one fixed ring.

The capture reads the pipe straight into the ring and writes the log file from the same bytes, so
each byte of a command's output is copied exactly twice (pipe → ring → page cache) whatever the
sizes of the reads. The ring holds ``keep + read_max`` bytes: the newest ``keep`` bytes are always
valid, while the next read (at most ``read_max`` bytes) fills the space of the oldest, which no
reader is shown.

The ring is an anonymous mapping: its pages are only made resident as output arrives, so a command
that prints one line costs one page, not the whole ring.
"""

from __future__ import annotations

import mmap


class RingTail:
    def __init__(self, keep: int, read_max: int) -> None:
        self.keep = keep
        self.read_max = read_max
        self.capacity = keep + read_max
        # Private: a shared anonymous mapping (Python's default) is shmem, whose pages MADV_DONTNEED
        # only unmaps from this process without freeing them.
        self._ring = mmap.mmap(-1, self.capacity, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.end = 0  # bytes ever committed
        self._dropped_at: int | None = None  # `end` when the held bytes were dropped

    def __len__(self) -> int:
        """How many of the most recent bytes are held."""
        if self._dropped_at is not None:
            return 0
        return min(self.end, self.keep)

    @property
    def start(self) -> int:
        """The offset of the first byte held (== end when nothing is)."""
        return self.end - len(self)

    def free_views(self, skip: int, n: int) -> list[memoryview]:
        """Where the next ``n`` bytes after ``end + skip`` go (one or two views; ``skip + n`` must
        not exceed ``read_max``). Fill them, then ``commit``."""
        assert skip + n <= self.read_max
        return self._views(self.end + skip, self.end + skip + n)

    def views(self, start: int, stop: int) -> list[memoryview]:
        """The ring's memory for absolute offsets [start, stop): valid for the held bytes and for
        bytes filled but not yet committed."""
        return self._views(start, stop)

    def commit(self, n: int) -> None:
        self.end += n

    def add(self, data: bytes) -> None:
        """Copy ``data`` in (for the few bytes Zuno writes itself; at most ``read_max``)."""
        pos = 0
        while pos < len(data):
            n = min(len(data) - pos, self.read_max)
            at = 0
            for view in self.free_views(0, n):
                view[:] = data[pos + at : pos + at + len(view)]
                at += len(view)
                view.release()
            self.commit(n)
            pos += n

    def slice(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) counted from the first byte held."""
        first = self.start
        start = max(0, start)
        stop = min(stop, len(self))
        if stop <= start:
            return b""
        out = bytearray()
        for view in self._views(first + start, first + stop):
            out += view
            view.release()
        return bytes(out)

    def drop(self) -> None:
        """Hold nothing from now on (windows are then served from the log file). The pages are
        given back by ``release_pages``, which the capture's own thread calls when no read is
        filling the ring."""
        if self._dropped_at is None:
            self._dropped_at = self.end

    @property
    def dropped(self) -> bool:
        return self._dropped_at is not None

    def release_pages(self) -> None:
        """Give the ring's pages back to the system (they read as zeros if touched again)."""
        if self._dropped_at is not None and not self._ring.closed:
            self._ring.madvise(mmap.MADV_DONTNEED)

    def _views(self, start: int, stop: int) -> list[memoryview]:
        cap = self.capacity
        if stop - start > cap:
            raise ValueError("a range longer than the ring")
        a = start % cap
        b = a + (stop - start)
        whole = memoryview(self._ring)
        if b <= cap:
            return [whole[a:b]]
        return [whole[a:cap], whole[0 : b - cap]]

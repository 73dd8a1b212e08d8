"""Bounded byte windows over saved output, with one cursor convention.

``cursor`` is an absolute byte offset and ``limit`` the window size (default 16384, clamped to
51200 — fixed, and independent of ``tool_output.max_bytes``). A window returns where the next one
starts (``cursor``) and ``hasMore``, and where it begins (``windowFrom``) and ``hasEarlier``.
A window never splits a UTF-8 character, so windows decode losslessly and concatenate to the
exact bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from zuno import limits


def clamp_limit(limit: int | None) -> int:
    if limit is None:
        return limits.WINDOW_DEFAULT_LIMIT
    return max(1, min(int(limit), limits.WINDOW_MAX_LIMIT))


def _utf8_cut(data: bytes) -> int:
    """How many bytes of data end on a character boundary (drops an incomplete trailing
    sequence of at most 3 bytes; leaves invalid bytes alone)."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        if b & 0x80 == 0:
            return n
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return n if back >= need else n - back
    return n


def _skip_continuations(data: bytes) -> int:
    i = 0
    while i < min(3, len(data)) and data[i] & 0xC0 == 0x80:
        i += 1
    return i


@dataclass(frozen=True, slots=True)
class Window:
    data: bytes
    window_from: int
    cursor: int
    total: int
    limit: int

    @property
    def has_more(self) -> bool:
        return self.cursor < self.total

    @property
    def has_earlier(self) -> bool:
        return self.window_from > 0

    def facts(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "hasMore": self.has_more,
            "windowFrom": self.window_from,
            "hasEarlier": self.has_earlier,
            "totalWritten": self.total,
            "bytes": len(self.data),
            "limit": self.limit,
        }

    def text(self) -> str:
        return self.data.decode("utf-8", "backslashreplace")


def read_window(
    path: str | os.PathLike[str],
    cursor: int | None,
    limit: int | None,
    *,
    from_end: bool = False,
    total: int | None = None,
) -> Window:
    """Read one window of a file. Without a cursor: from byte 0, or (``from_end``) the newest
    window ending at ``total``."""
    with open(path, "rb") as f:
        return read_window_fd(f.fileno(), cursor, limit, from_end=from_end, total=total)


def read_window_fd(
    fd: int, cursor: int | None, limit: int | None, *, from_end: bool = False, total: int | None = None
) -> Window:
    """read_window over an open descriptor (one opened without following links, say): only the
    window's bytes are read, at their offset."""
    lim = clamp_limit(limit)
    size = os.fstat(fd).st_size if total is None else total
    aligned_start = False
    if cursor is None:
        start = max(0, size - lim) if from_end else 0
        aligned_start = from_end and start > 0
    else:
        start = min(max(0, cursor), size)
    data = os.pread(fd, min(lim, size - start), start) if size > start else b""
    if aligned_start:
        skip = _skip_continuations(data)
        start += skip
        data = data[skip:]
    if start + len(data) < size:
        data = data[: _utf8_cut(data)] or data
    return Window(data, start, start + len(data), size, lim)

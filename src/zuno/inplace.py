"""Rewriting a file that has more than one name (hard links) inside its own inode.

A rename over the name would give that one name a new inode and leave every other name with the
old content. ``safefs.atomic_write`` therefore rewrites a multiply-linked file in place, through
the descriptor it opened without following a link and checked; this module holds the byte work.
The caller has already written the new content whole to a flushed temporary file beside it (the
recovery copy), so a crash in the middle of the overwrite leaves the new bytes whole there.

The overwrite extends the file first (the bytes past the old end), then rewrites the old extent,
then cuts what is left over: a full disk fails while extending, before any old byte changed, and
the file is cut back to its old size. A failure later is undone by writing the old bytes back;
only when that fails too is the file left mixed (the caller then keeps the recovery copy).
"""

from __future__ import annotations

import hashlib
import os

from zuno import limits


def read_all(fd: int) -> bytes:
    """The whole file behind fd, read from offset 0 (the descriptor's position is not used)."""
    chunks: list[bytes] = []
    at = 0
    while chunk := os.pread(fd, limits.FILE_READ_CHUNK, at):
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)


def digest(fd: int) -> str:
    """SHA-256 of the whole file behind fd, streamed."""
    h = hashlib.sha256()
    at = 0
    while chunk := os.pread(fd, limits.FILE_READ_CHUNK, at):
        h.update(chunk)
        at += len(chunk)
    return h.hexdigest()


def _pwrite_all(fd: int, data: bytes | memoryview, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        view = view[n:]
        at += n


def overwrite(fd: int, old: bytes, data: bytes) -> None:
    """Make the file behind fd hold exactly ``data`` (it held ``old``), flushed to disk. On an
    error the old bytes are put back (best effort) and the error is raised; ``restored`` on it says
    whether the put-back worked."""
    view = memoryview(data)
    try:
        if len(data) > len(old):
            _pwrite_all(fd, view[len(old) :], len(old))  # extend first: no old byte changed yet
        _pwrite_all(fd, view[: min(len(old), len(data))], 0)
        if len(data) < len(old):
            os.ftruncate(fd, len(data))
        os.fsync(fd)
    except OSError as e:
        e.restored = _restore(fd, old)  # type: ignore[attr-defined]
        raise


def _restore(fd: int, old: bytes) -> bool:
    try:
        _pwrite_all(fd, old, 0)
        os.ftruncate(fd, len(old))
        os.fsync(fd)
    except OSError:
        return False
    return read_all(fd) == old

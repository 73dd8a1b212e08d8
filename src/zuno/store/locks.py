"""Advisory lock files that do not accumulate: a holder removes its file on release.

Removal races with a process that opened the file just before it was unlinked: that process would
lock an orphan inode while a third creates a fresh file, and both would think they hold it. So the
releaser unlinks while still holding the lock, and an acquirer, after locking, checks that the path
still names the inode it locked — if not, it closes and tries again. The kernel drops a lock when
its holder dies (a kill -9 never leaves one stuck; the file stays until the next holder removes it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

# How often an acquirer re-opens a lock file that a releasing holder removed meanwhile.
LOCK_FILE_RETRIES = 100


def hold_lock_file(path: Path) -> int | str | None:
    """Lock ``path`` (created when missing) without waiting: the descriptor holding it; or, when
    another process holds it, the pid that holder wrote (a string, "unknown" if none); or None when
    the file kept being replaced under us."""
    for _ in range(LOCK_FILE_RETRIES):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            return holder
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # removed (and maybe re-created) by a releasing holder: this inode is an orphan
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd
    return None


def release_lock_file(fd: int, path: Path) -> None:
    """Unlink the file while still holding its lock, then close (which releases it)."""
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == os.fstat(fd).st_ino:
            os.unlink(path)
    os.close(fd)

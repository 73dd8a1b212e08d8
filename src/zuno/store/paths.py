"""Where a store may live: a path is checked before SQLite sees it, so a directory, a file that is
not a database, or a missing directory is one clear line, and nothing is created by mistake."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class StoreUnusable(Exception):
    """The store path cannot be used (a directory, not a SQLite database, a parent that does not
    exist, unreadable): one line naming the file, the problem and the fix. Nothing was created."""


_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store_path(path: Path, *, create: bool) -> bool:
    """Whether the store at ``path`` exists; raises StoreUnusable when it cannot be one. With
    ``create`` the parent directory must exist already unless it is the workspace's own state
    directory (the caller makes that one): a mistyped ``--db`` never creates directories."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise StoreUnusable(
                f"store {path}: its directory {path.parent} does not exist. Create it first, or name a "
                "database in an existing directory with --db (or $ZUNO_DB)."
            ) from None
        if create and not os.access(path.parent, os.W_OK | os.X_OK):
            raise StoreUnusable(
                f"store {path}: its directory {path.parent} is not writable. Choose another --db."
            ) from None
        return False
    except OSError as e:
        raise StoreUnusable(f"store {path}: cannot be read ({e.strerror}). Choose another --db.") from None
    if stat.S_ISDIR(st.st_mode):
        raise StoreUnusable(
            f"store {path} is a directory, not a database file. Name a file, e.g. --db {path / 'zuno.db'}."
        )
    if not stat.S_ISREG(st.st_mode):
        raise StoreUnusable(f"store {path} is not a regular file. Name a database file with --db.")
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise StoreUnusable(f"store {path}: cannot be read ({e.strerror}). Check its permissions.") from None
    if head and head != _SQLITE_MAGIC:
        raise StoreUnusable(
            f"store {path} is not a SQLite database (it holds something else). Name another file with --db; "
            "Zuno never overwrites it."
        )
    return True

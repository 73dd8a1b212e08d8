"""Whether a job row left open is really still running, from /proc (for listings read without
the session: ``zuno sessions``).

A row stays ``running`` (``ended_at`` NULL) until a process of its session records the end. When
the process holding the job died (kill -9), its guard took the group with it, and the row is only
marked ``lost`` by the session's next process; until then the row alone would report a job that
no longer runs. A job counts as open only while a live (not zombie) process is in its group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zuno.process import procfs

if TYPE_CHECKING:
    from zuno.store import Store


def group_running(pgid: int | None) -> bool:
    """Is a live process (not a zombie) in process group pgid?"""
    if not pgid or pgid <= 1 or not procfs.group_exists(pgid):
        return False
    for pid, _start in procfs.group_members(pgid):
        st = procfs.stat(pid)
        if st is not None and st[2] != "Z":
            return True
    return False


def open_jobs(store: Store, session_id: str) -> int:
    """How many of the session's jobs not yet recorded as ended still have a live group."""
    rows = store.query("SELECT pgid FROM jobs WHERE session_id = ? AND ended_at IS NULL", (session_id,))
    return sum(1 for r in rows if group_running(r["pgid"]))

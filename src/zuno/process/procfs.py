"""Reading process facts from /proc: a process's group and start time.

A pid alone proves nothing about a process (pids are reused); the pair (pid, start time) does,
for as long as /proc shows that pid with that start time.
"""

from __future__ import annotations

import os


def stat(pid: int) -> tuple[int, int, str] | None:
    """(pgid, starttime, state) of pid, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[2]), int(rest[19]), rest[0].decode("ascii", "replace")
    except (IndexError, ValueError):
        return None


def is_member(pid: int, starttime: int, pgid: int) -> bool:
    """Is this exact process (pid + start time) still alive (a zombie counts: it still holds
    the group) and still in process group pgid?"""
    st = stat(pid)
    return st is not None and st[1] == starttime and st[0] == pgid


def group_members(pgid: int) -> list[tuple[int, int]]:
    """Every (pid, starttime) whose process group is pgid."""
    found: list[tuple[int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            st = stat(int(name))
            if st is not None and st[0] == pgid:
                found.append((int(name), st[1]))
    return found


def group_exists(pgid: int) -> bool:
    if pgid <= 1:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pipe_holders(inode: int, exclude: int, limit: int = 5) -> list[tuple[int, str]]:
    """(pid, command name) of up to ``limit`` processes that hold pipe ``inode`` open, other than
    ``exclude`` (this process, which holds its read end). Processes this user cannot look into are
    not seen."""
    target = f"pipe:[{inode}]"
    found: list[tuple[int, str]] = []
    try:
        names = sorted(os.listdir("/proc"), key=lambda n: (len(n), n))
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == exclude:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") != target:
                    continue
            except OSError:
                continue
            try:
                with open(f"/proc/{name}/comm", "rb") as f:
                    comm = f.read().decode("utf-8", "replace").strip()
            except OSError:
                comm = "?"
            found.append((int(name), comm))
            break
        if len(found) >= limit:
            break
    return found

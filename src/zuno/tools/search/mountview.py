"""rg confined to a private view of the filesystem (a mount namespace of the spawner thread's own).

The other confinement (``confine.py``, Landlock) has the kernel check every path rg opens against
its rules; on trees of thousands of files that check costs rg 5-10%. Where the process may make a
mount namespace (root, or CAP_SYS_ADMIN), the spawner thread instead leaves the process's namespace
for one of its own and builds there a root that holds only what a search may read: the workspace's
roots and the directories granted (bound read-only at their own paths), rg's directory, the system's
libraries and loader cache, the ignore files above a root and the user's global git ignore files,
and an empty ``.git`` where a directory above a root is a repository (rg applies ``.gitignore``
only inside one). The thread then makes that root its own (``pivot_root``) and lets go of the
process's: nothing else exists for it or for the rg it starts. A directory swapped for a symlink to
outside while rg walks resolves inside the view, where no such path is. A path lookup costs what it
costs outside: the check is where the files are, not on each open.

Symlinks on the way to what is bound (``/lib`` -> ``usr/lib``) are made again in the view as they
are, so every path means there what it means outside. Mounts made below the workspace later are
seen in the view too (its mounts are the process's slaves); nothing made in the view is seen
outside.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
import tempfile
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CLONE_FS = 0x00000200
CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_SLAVE = 1 << 19
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
# How many symlinks one path may pass through while it is made in the view (the kernel's own bound).
MAX_SYMLINK_HOPS = 40
# The view's own root: a small tmpfs holding only directories, symlinks and mount points.
VIEW_TMPFS_OPTIONS = b"size=1m,mode=0755"


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def available() -> bool:
    """Could a view be made at all here (Linux, a known pivot_root number)?"""
    return sys.platform.startswith("linux") and os.uname().machine in _PIVOT_ROOT


@dataclass(slots=True)
class ViewPlan:
    """What the view holds: directories and files bound read-only at their own paths, and the
    directories above the roots that are repositories (an empty ``.git`` is made in each)."""

    dirs: list[str]
    files: list[str]
    repo_markers: list[str] = field(default_factory=list)


class _Builder:
    """Makes paths in the view under ``stage`` (the tmpfs, before it becomes the root)."""

    def __init__(self, libc: Any, stage: str) -> None:
        self.libc, self.stage = libc, stage
        self.bound: list[str] = []  # host paths now visible whole (nothing is made beneath them)
        self.made: set[str] = set()

    def _beneath_bound(self, path: str) -> bool:
        return any(path == b or path.startswith(b.rstrip("/") + "/") for b in self.bound)

    def _mount(self, src: str | None, target: str, fstype: str | None, flags: int, data: bytes | None = None) -> None:
        _check(
            self.libc.mount(
                src.encode() if src is not None else None,
                target.encode(),
                fstype.encode() if fstype is not None else None,
                flags,
                data,
            ),
            f"mount {src or fstype} on {target}",
        )

    def _bind(self, host: str, is_dir: bool) -> None:
        target = self.stage + host
        if is_dir:
            os.makedirs(target, exist_ok=True)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        self._mount(host, target, None, MS_BIND | MS_REC)
        # Read-only too (rg writes nothing; a bind of a mount the kernel locked may refuse: the
        # view still holds only what it holds).
        with contextlib.suppress(OSError):
            self._mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        self.bound.append(host)

    def _make_dir(self, host: str) -> None:
        if host not in self.made and not self._beneath_bound(host):
            os.makedirs(self.stage + host, exist_ok=True)
            self.made.add(host)

    def expose(self, path: str, how: str) -> None:
        """Make ``path`` resolve in the view as on the host: each directory on the way made, each
        symlink on the way made again and followed, the last component bound (``how`` "bind") or,
        for a repository's ``.git``, made an empty directory (``how`` "marker"). A path that does
        not exist (now) is left out."""
        todo = deque(p for p in path.split("/") if p)
        cur = "/"
        hops = 0
        while todo:
            name = todo.popleft()
            if name == ".":
                continue
            if name == "..":
                cur = os.path.dirname(cur)
                continue
            host = os.path.join(cur, name)
            try:
                st = os.lstat(host)
            except OSError:
                return
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    return
                target = os.readlink(host)
                if host not in self.made and not self._beneath_bound(host):
                    self._make_dir(cur)
                    os.symlink(target, self.stage + host)
                    self.made.add(host)
                todo.extendleft(reversed([p for p in target.split("/") if p]))
                if target.startswith("/"):
                    cur = "/"
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if todo:
                if not is_dir:
                    return
                cur = host
                continue
            if self._beneath_bound(host):
                return
            if how == "marker" and is_dir:
                self._make_dir(host)
            elif is_dir or stat.S_ISREG(st.st_mode):
                self._make_dir(cur)
                self._bind(host, is_dir)
            return


def _by_depth(paths: Iterable[str]) -> list[str]:
    return sorted(dict.fromkeys(os.path.normpath(p) for p in paths), key=lambda p: (p.count("/"), p))


def enter(plan: ViewPlan, stage: str) -> None:
    """Move the calling thread into a view holding only what ``plan`` names (``stage``: an empty
    directory the view's tmpfs is mounted on while it is built; removable once this returns).
    Raises OSError (EPERM where the process may not make a mount namespace): the thread is then in
    a namespace of its own whose root is still the process's, and must confine itself otherwise or
    end."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS | CLONE_FS), "unshare(CLONE_NEWNS)")
    builder = _Builder(libc, stage)
    builder._mount(None, "/", None, MS_REC | MS_SLAVE)  # nothing made here is seen outside
    builder._mount("zuno-rg-view", stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, VIEW_TMPFS_OPTIONS)
    for d in _by_depth(plan.dirs):
        builder.expose(d, "bind")
    for f in _by_depth(plan.files):
        builder.expose(f, "bind")
    for m in _by_depth(plan.repo_markers):
        builder.expose(m, "marker")
    # The view's root becomes the thread's own; the process's root is let go of (pivot_root(".", ".")
    # stacks the old root on the new, the detach takes it away).
    with contextlib.suppress(OSError):
        builder._mount(None, stage, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    os.chdir(stage)
    _check(libc.syscall(_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "umount the process's root")
    os.chdir("/")


# Where the view may be built, first that is outside every path the view holds (a stage beneath a
# root would be bound into the view with the root, and a search of the root would walk it).
STAGE_PARENTS = (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", "/run")


def new_stage(held: Iterable[str]) -> str:
    """An empty directory to build a view on, outside every path in ``held`` (the caller removes
    it once the view is entered). Raises OSError when there is none."""
    held = [os.path.realpath(h) for h in held]
    for parent in STAGE_PARENTS:
        real = os.path.realpath(parent)
        if not os.path.isdir(real) or any(real == h or real.startswith(h.rstrip("/") + "/") for h in held):
            continue
        with contextlib.suppress(OSError):
            return tempfile.mkdtemp(prefix="zuno-rg-view-", dir=real)
    raise OSError(f"no directory to build the view on outside {', '.join(held)}")


def remove_stage(stage: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(stage)


def repo_markers(roots: Iterable[str]) -> list[str]:
    """The ``.git`` of each directory above a root that has one (rg looks for it to know whether
    the ``.gitignore`` files it finds apply)."""
    out = []
    for root in roots:
        d = os.path.dirname(os.path.normpath(root))
        while True:
            g = os.path.join(d, ".git")
            if os.path.lexists(g):
                out.append(g)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return out

"""File access beneath a workspace root (or a granted directory) that no symbolic link can redirect.

``Workspace.resolve`` turns a model-given name into a real path inside the workspace once. Every
later open goes through this module, which never follows a link again: it opens the root, then
every directory below it with no-follow semantics — Linux ``openat2`` with ``RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the kernel has it, else a chain of
``openat(..., O_NOFOLLOW | O_DIRECTORY)`` — and acts on the last component relative to that
directory descriptor: missing directories are made with ``mkdir(dir_fd=)``, a temporary file is
created and renamed inside the same directory descriptor, reads open with ``O_NOFOLLOW |
O_NONBLOCK`` and check the descriptor's type (never a stat-then-open race), deletes use
``unlink(dir_fd=)``. A directory swapped for a link after resolution makes the call a refusal
naming the component; nothing is created outside.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from zuno import inplace, limits
from zuno.declarations import BlockKind
from zuno.errors import Refused

TMP_SUFFIX = ".zuno-tmp"

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC

# openat2(2): linux/openat2.h
_SYS_OPENAT2 = 437  # the same number on every architecture (added after the syscall tables merged)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc: ctypes.CDLL | None = None
_openat2_ok: bool | None = None  # None: not probed yet


def _openat2(dirfd: int, rel: str, flags: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    how = _OpenHow(flags, 0, _RESOLVE)
    fd = _libc.syscall(_SYS_OPENAT2, dirfd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), rel)
    return int(fd)


def openat2_available() -> bool:
    """Whether this kernel (and any seccomp filter around us) lets openat2 through."""
    global _openat2_ok
    if _openat2_ok is None:
        if not os.uname().sysname == "Linux":
            _openat2_ok = False
        else:
            root = os.open("/", _DIR_FLAGS)
            try:
                os.close(_openat2(root, ".", _DIR_FLAGS))
                _openat2_ok = True
            except (OSError, AttributeError):
                _openat2_ok = False
            finally:
                os.close(root)
    return _openat2_ok


class NotRegular(OSError):
    """The path names something that is not a regular file (a FIFO, a device, a socket)."""

    def __init__(self, what: str, filename: str) -> None:
        super().__init__(errno.EINVAL, f"it is {what}, not a regular file", filename)
        self.what = what


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


@dataclass(frozen=True, slots=True)
class Target:
    """A path as components below a trusted root (the workspace root or a granted directory)."""

    root: Path
    parts: tuple[str, ...]
    field: str = "path"

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else "."

    def shown(self, upto: int | None = None) -> str:
        return "/".join(self.parts[:upto]) or "."

    def child(self, *names: str) -> Target:
        return Target(self.root, (*self.parts, *names), self.field)


def target(roots: list[Path], path: Path, field: str = "path") -> Target:
    """The Target of an already resolved absolute path: beneath the deepest root that holds it."""
    best: Path | None = None
    for r in roots:
        if (path == r or path.is_relative_to(r)) and (best is None or len(r.parts) > len(best.parts)):
            best = r
    if best is None:
        raise Refused(BlockKind.denied, f"argument '{field}': {str(path)!r} is outside the workspace.")
    parts = tuple(p for p in path.relative_to(best).parts if p not in ("", "."))
    if ".." in parts:
        raise Refused(BlockKind.invalid_arguments, f"argument '{field}': {str(path)!r} still holds '..'.")
    return Target(best, parts, field)


# -- errors the walk turns into refusals --------------------------------------------------------


def _linked(t: Target, upto: int) -> Refused:
    return Refused(
        BlockKind.denied,
        f"argument '{t.field}': {t.shown(upto)!r} is a symbolic link. Zuno opens paths below the workspace without "
        "following links it did not resolve (a directory swapped for a link after the path was resolved, a link "
        "inside Zuno's own folders, or a link loop), so nothing was done. Name the real path.",
        component=t.shown(upto),
    )


def _too_long(t: Target, name: str) -> Refused:
    return Refused(
        BlockKind.invalid_arguments,
        f"argument '{t.field}': the name {name[:40]!r}... is {len(os.fsencode(name))} bytes; a file name holds at most "
        f"{limits.PATH_NAME_MAX_BYTES} bytes. Use a shorter name.",
    )


def _translate(e: OSError, t: Target, upto: int) -> BaseException:
    if e.errno == errno.ELOOP:
        return _linked(t, upto)
    if e.errno == errno.ENAMETOOLONG:
        return _too_long(t, t.parts[upto - 1] if upto else t.name)
    if e.errno == errno.EXDEV:  # openat2 RESOLVE_BENEATH: a component left the root
        return _linked(t, upto)
    return e


# -- directories --------------------------------------------------------------------------------


def _open_root(t: Target) -> int:
    # The root itself was resolved once and is trusted; links above it are the user's own.
    return os.open(t.root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)


def open_dir(t: Target, n: int | None = None, *, create: bool = False, made: list[int] | None = None) -> int:
    """A descriptor of the directory made of the first ``n`` components (all by default), each
    opened without following a link. ``create`` makes missing directories on the way (``made``
    collects how many components deep each one it made is). Raises FileNotFoundError /
    NotADirectoryError, or Refused for a link or a name too long."""
    n = len(t.parts) if n is None else n
    parts = t.parts[:n]
    fd = _open_root(t)
    if not parts:
        return fd
    if openat2_available():
        try:
            sub = _openat2(fd, "/".join(parts), os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
            os.close(fd)
            return sub
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ELOOP, errno.EXDEV, errno.EAGAIN, errno.ENOTDIR):
                os.close(fd)
                raise _translate(e, t, n) from None
            # walk step by step: to create what is missing, or to name the component at fault
    try:
        for i, part in enumerate(parts, 1):
            fd = _step(fd, part, t, i, create, made)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(fd: int, part: str, t: Target, i: int, create: bool, made: list[int] | None = None) -> int:
    for _ in range(8):
        try:
            sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
                if made is not None:
                    made.append(i)
            except FileExistsError:
                pass  # made meanwhile: open it (without following) on the next turn
            except OSError as e:
                raise _translate(e, t, i) from None
            continue
        except NotADirectoryError:
            # O_NOFOLLOW | O_DIRECTORY on a link says ENOTDIR: tell a link from a file.
            try:
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
            except OSError:
                continue  # gone meanwhile: look again
            if stat.S_ISLNK(mode):
                raise _linked(t, i) from None
            if stat.S_ISDIR(mode):
                continue  # a directory again (swapped back): open it on the next turn
            raise NotADirectoryError(errno.ENOTDIR, "a parent is not a directory", t.shown(i)) from None
        except OSError as e:
            raise _translate(e, t, i) from None
        os.close(fd)
        return sub
    raise _linked(t, i)


@contextlib.contextmanager
def parent(t: Target, *, create: bool = False) -> Iterator[int]:
    """The descriptor of the target's parent directory, for acting on ``t.name`` with dir_fd.
    Directories it had to make are removed again (when still empty) if the body fails, so a
    write that failed (a full disk, a read-only mount) leaves no trace of its parents either."""
    made: list[int] = []
    try:
        fd = open_dir(t, len(t.parts) - 1, create=create, made=made)
    except BaseException:  # e.g. no room for the second of two directories: the first goes too
        _remove_made(t, made)
        raise
    try:
        yield fd
    except BaseException:
        os.close(fd)
        fd = -1
        _remove_made(t, made)
        raise
    finally:
        if fd >= 0:
            os.close(fd)


def _remove_made(t: Target, made: list[int]) -> None:
    """Remove the directories ``open_dir`` made for ``t`` (deepest first) while they are empty."""
    for i in sorted(made, reverse=True):
        try:
            up = open_dir(t, i - 1)
        except (OSError, Refused):
            return
        try:
            os.rmdir(t.parts[i - 1], dir_fd=up)
        except OSError:
            return  # not empty (someone else put something there) or gone: leave the rest
        finally:
            os.close(up)


def lstat(t: Target) -> os.stat_result | None:
    """The target's own status (a link is not followed), or None when it or a parent is missing."""
    if not t.parts:
        fd = _open_root(t)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)
    try:
        with parent(t) as pfd:
            return os.stat(t.name, dir_fd=pfd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise _translate(e, t, len(t.parts)) from None


def mkdirs(t: Target) -> None:
    os.close(open_dir(t, create=True))


def listdir(t: Target) -> list[tuple[str, bool]]:
    """(name, is a directory) for each entry of the directory target, sorted by name."""
    fd = open_dir(t)
    try:
        out = []
        with os.scandir(fd) as it:
            for e in it:
                try:
                    is_dir = e.is_dir()
                except OSError:
                    is_dir = False
                out.append((e.name, is_dir))
    finally:
        os.close(fd)
    return sorted(out)


# -- files --------------------------------------------------------------------------------------


def open_regular(t: Target, flags: int = os.O_RDONLY) -> int:
    """Open the target file without following a link and without blocking on a FIFO, then check
    the descriptor: a directory raises IsADirectoryError, anything else not regular NotRegular."""
    if not t.parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", ".")
    with parent(t) as pfd:
        try:
            fd = os.open(t.name, flags | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=pfd)
        except OSError as e:
            if e.errno == errno.ENXIO:  # a socket (or a FIFO opened for writing with no reader)
                st = os.stat(t.name, dir_fd=pfd, follow_symlinks=False)
                raise NotRegular(kind_of(st.st_mode), t.shown()) from None
            if e.errno == errno.EISDIR:
                raise IsADirectoryError(errno.EISDIR, "is a directory", t.shown()) from None
            if e.errno == errno.ELOOP:
                st = os.stat(t.name, dir_fd=pfd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise _linked(t, len(t.parts)) from None
            raise _translate(e, t, len(t.parts)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", t.shown())
        if not stat.S_ISREG(mode):
            raise NotRegular(kind_of(mode), t.shown())
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(t: Target, max_bytes: int | None = None) -> bytes:
    """The whole regular file (or its first max_bytes + 1 bytes, so a caller can tell it is over)."""
    fd = open_regular(t)
    try:
        chunks: list[bytes] = []
        got = 0
        cap = None if max_bytes is None else max_bytes + 1
        while cap is None or got < cap:
            chunk = os.read(fd, limits.FILE_READ_CHUNK if cap is None else min(limits.FILE_READ_CHUNK, cap - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_if_regular(t: Target) -> bytes | None:
    """The file's bytes, or None when nothing is there; a directory or special file raises."""
    try:
        return read_bytes(t)
    except FileNotFoundError:
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


MISSING = "absent"  # ``expect`` for a target that must not exist (the patch tool's digest of nothing)


class Changed(Exception):
    """The file is no longer what the caller checked (``expect``): found on the descriptor that
    was about to be replaced or rewritten, so nothing was written. ``digest`` is what is there now
    (MISSING when nothing is)."""

    def __init__(self, digest: str) -> None:
        super().__init__("the file changed after it was checked; nothing was written")
        self.digest = digest


@dataclass(frozen=True, slots=True)
class Written:
    """How atomic_write replaced the file: ``in_place`` when it kept the inode (the file had more
    than one name, ``links`` of them, and every name shows the new content); else renamed over the
    name (``links`` > 1 then means the other names kept the old content)."""

    in_place: bool = False
    links: int = 1


def _temp_name(name: str) -> str:
    """A fresh hidden name beside ``name`` that says whose copy it is (``.NAME.HEX.zuno-tmp``),
    or a bare random one when that would be over a file name's length."""
    tag = secrets.token_hex(8)
    named = f".{name}.{tag}{TMP_SUFFIX}"
    return named if len(os.fsencode(named)) <= limits.PATH_NAME_MAX_BYTES else f".{tag}{TMP_SUFFIX}"


def _open_current(t: Target, pfd: int, writable: bool) -> tuple[int, bool] | None:
    """The existing target opened without following a link (and without blocking on a FIFO), and
    whether it is open for writing: ``writable`` asks for read-write, and falls back to read-only
    where the kernel refuses a write open (a running executable, a read-only mount or mode). None
    when nothing is there. A symbolic link swapped in is refused; anything not regular raises."""
    flags = _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
    for rw in (True, False) if writable else (False,):
        try:
            fd = os.open(t.name, flags | (os.O_RDWR if rw else os.O_RDONLY), dir_fd=pfd)
        except FileNotFoundError:
            return None
        except OSError as e:
            if rw and e.errno in (errno.ETXTBSY, errno.EACCES, errno.EPERM, errno.EROFS):
                continue
            if e.errno == errno.ELOOP:
                raise _linked(t, len(t.parts)) from None
            if e.errno == errno.EISDIR:
                raise IsADirectoryError(errno.EISDIR, "is a directory", t.shown()) from None
            if e.errno == errno.ENXIO:
                raise NotRegular("a socket or a FIFO", t.shown()) from None
            raise _translate(e, t, len(t.parts)) from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", t.shown())
            raise NotRegular(kind_of(mode), t.shown())
        return fd, rw
    return None  # unreachable: the read-only open either returns or raises


def atomic_write(
    t: Target,
    data: bytes,
    mode: int | None,
    *,
    refuse_protected: bool = False,
    like: tuple[Target, os.stat_result] | None = None,
    keep_links: bool = False,
    expect: str | None = None,
) -> Written:
    """Replace (or create) the target with exactly data: a temporary file in the same directory
    descriptor, flushed to disk, then renamed over the name. Missing parents are made through the
    same no-follow walk. ``mode``, when given, is set before the rename (a new file takes 0666
    less the umask). ``refuse_protected``: an existing file this process may not write is a
    PermissionError rather than replaced (the file tools; Zuno's own read-only artifacts are not).
    ``like``: a file and its stat when it was checked (a move's source) whose owner and kept
    extended attributes the new file takes instead of the replaced one's, as ``mv`` keeps them.

    ``expect``: the SHA-256 of the bytes the caller checked (MISSING: nothing was there); checked
    on the descriptor of the file about to be replaced, just before it is, else Changed.
    ``keep_links``: a file with more than one name (hard links) is rewritten inside its own inode,
    so every name shows the new content (``inplace``): the temporary file, flushed first, stays
    until the inode is flushed, so a crash in the middle leaves the new content whole in it
    (``.NAME.HEX.zuno-tmp`` beside the file). The link count is read on that descriptor just before
    the rename, so a link made after the check but before that is kept too."""
    if not t.parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", ".")
    with parent(t, create=True) as pfd:
        try:
            st = os.stat(t.name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise _translate(e, t, len(t.parts)) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", t.shown())
        if refuse_protected and st is not None and not _may_write(t.name, pfd):
            raise _write_protected(t)
        cur, rw = -1, False
        if st is not None and (keep_links or expect is not None) and not stat.S_ISLNK(st.st_mode):
            opened = _open_current(t, pfd, keep_links)
            if opened is not None:
                cur, rw = opened
                st = os.fstat(cur)  # the inode that is checked, kept and maybe rewritten
            else:
                st = None
        try:
            return _replace(t, pfd, data, mode, st, cur, rw, like, expect)
        finally:
            if cur >= 0:
                os.close(cur)


def _replace(
    t: Target,
    pfd: int,
    data: bytes,
    mode: int | None,
    st: os.stat_result | None,
    cur: int,
    rw: bool,
    like: tuple[Target, os.stat_result] | None,
    expect: str | None,
) -> Written:
    tmp = _temp_name(t.name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o666, dir_fd=pfd)
    keep_tmp = False
    try:
        try:
            _write_all(fd, data)
            if like is not None:
                _keep_like(fd, *like)
            elif st is not None:
                _keep_owner(fd, st)  # before the mode: a chown clears set-id bits
                _keep_xattrs(t.name, pfd, fd, st)
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        links = os.fstat(cur).st_nlink if cur >= 0 else 1
        old = inplace.read_all(cur) if cur >= 0 and rw and links > 1 else None
        if expect is not None:
            now = MISSING if cur < 0 else (hashlib.sha256(old).hexdigest() if old is not None else inplace.digest(cur))
            if now != expect:
                raise Changed(now)
        if old is None:
            os.rename(tmp, t.name, src_dir_fd=pfd, dst_dir_fd=pfd)
            return Written(False, links)
        try:
            inplace.overwrite(cur, old, data)
        except OSError as e:
            if getattr(e, "restored", False):
                raise
            keep_tmp = True
            raise OSError(
                e.errno,
                f"{e.strerror}; the file (one inode of {links} names) is partly rewritten, and its new content "
                f"is whole in {tmp} beside it",
                t.shown(),
            ) from e
        if mode is not None and stat.S_IMODE(os.fstat(cur).st_mode) != mode:
            with contextlib.suppress(OSError):
                os.fchmod(cur, mode)  # a write by a non-owner clears set-id bits; the mode asked for is kept
        os.unlink(tmp, dir_fd=pfd)
        return Written(True, links)
    except BaseException:
        if not keep_tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=pfd)
        raise


# Extended attributes a rewrite carries over: user.* (tags, origin marks), the POSIX access ACL
# and an SELinux label. Not security.capability (a rewritten executable loses its file capabilities,
# as a write in place does), nor other security.*/trusted.* entries.
_ACL_ACCESS = "system.posix_acl_access"
_KEPT_XATTRS = (_ACL_ACCESS, "security.selinux")


def _kept_xattr(key: str) -> bool:
    return key.startswith("user.") or key in _KEPT_XATTRS


def _keep_xattrs(name: str, pfd: int, fd: int, st: os.stat_result) -> None:
    """Carry the replaced regular file's extended attributes that describe who may use it and how
    it is tagged (``_kept_xattr``) over to the replacement, as far as the file system allows: a
    rename would drop them silently. An access ACL the temporary file inherited from the
    directory's default ACL, where the replaced file had none, is removed: a rewrite is not a new
    file. Copied only from the inode that was looked at."""
    if not stat.S_ISREG(st.st_mode) or not hasattr(os, "listxattr"):
        return
    try:
        old = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=pfd)
    except OSError:
        return
    try:
        now = os.fstat(old)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return  # the name was swapped since it was looked at: copy nothing from another file
        try:
            keys = os.listxattr(old)
        except OSError:
            return
        for key in filter(_kept_xattr, keys):
            with contextlib.suppress(OSError):
                os.setxattr(fd, key, os.getxattr(old, key))
        if _ACL_ACCESS not in keys:
            with contextlib.suppress(OSError):
                os.removexattr(fd, _ACL_ACCESS)
    finally:
        os.close(old)


def _keep_like(fd: int, src: Target, st: os.stat_result) -> None:
    """Owner and kept extended attributes from another file (a move's source), as far as allowed;
    the attributes only while its name still holds the inode that was checked."""
    _keep_owner(fd, st)
    if not src.parts:
        return
    with contextlib.suppress(OSError), parent(src) as spfd:
        _keep_xattrs(src.name, spfd, fd, st)


def _keep_owner(fd: int, st: os.stat_result) -> None:
    """Give the replacement the replaced file's owner and group, as far as this process may (root
    rewriting a user's file must not leave it root's; anyone may keep a group they belong to)."""
    own = os.fstat(fd)
    if (own.st_uid, own.st_gid) == (st.st_uid, st.st_gid):
        return
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        with contextlib.suppress(OSError):
            os.fchown(fd, -1, st.st_gid)


def _may_write(name: str, pfd: int) -> bool:
    """Whether this process may write the existing file itself (its mode, ACL, read-only mount),
    asked of the kernel without opening it. A rename over it needs only the directory's
    permission, so without this a file made read-only (chmod a-w) would be replaced anyway."""
    return os.access(name, os.W_OK, dir_fd=pfd, effective_ids=True, follow_symlinks=False)


def _write_protected(t: Target) -> PermissionError:
    return PermissionError(
        errno.EACCES, "it is write-protected, which this process may not write; chmod u+w allows it", t.shown()
    )


def writable(t: Target) -> bool:
    """Whether an existing target file may be replaced: True when it is missing (creation is the
    directory's matter, checked when it happens)."""
    try:
        with parent(t) as pfd:
            try:
                os.stat(t.name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                return True
            return _may_write(t.name, pfd)
    except (FileNotFoundError, NotADirectoryError):
        return True


def append(t: Target, data: bytes) -> None:
    """Append to an existing regular file (opened without following a link)."""
    fd = open_regular(t, os.O_WRONLY | os.O_APPEND)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def create_exclusive(t: Target, data: bytes, mode: int = 0o644, *, make_parents: bool = True) -> None:
    """Create the target, never over anything that exists (FileExistsError), and write data."""
    with parent(t, create=make_parents) as pfd:
        try:
            fd = os.open(t.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=pfd)
        except FileExistsError:
            raise
        except OSError as e:
            raise _translate(e, t, len(t.parts)) from None
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def unlink(t: Target) -> None:
    """Remove the target's own directory entry (a link is removed, never followed)."""
    with parent(t) as pfd:
        st = os.stat(t.name, dir_fd=pfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", t.shown())
        os.unlink(t.name, dir_fd=pfd)

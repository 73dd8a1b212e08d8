"""The workspace a session works in: its root, the directories it was granted, and the
`.zuno/` state folder. Paths from a model are resolved here and nowhere else."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from zuno import limits, safefs
from zuno.declarations import BlockKind
from zuno.errors import Refused

if TYPE_CHECKING:
    import asyncio

STATE_DIR = ".zuno"
# A session's saved outputs, under the state directory (zuno.output.Artifacts; zuno sessions prune).
ARTIFACTS_DIR = "artifacts"
_STATE_GITIGNORE = "# Zuno's durable state: never committed.\n*\n"


class MutationLock:
    """One mutation lock per workspace: an asyncio lock within the process, and an advisory file
    lock (``.zuno/locks/mutation.lock``) across processes, so two sessions driven by two processes
    cannot interleave validate-then-write on the same files. The kernel drops the file lock when a
    holder dies. Waiting is cancellable."""

    POLL_S = 0.01

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._lock: asyncio.Lock | None = None  # made when first taken: a command that only reads loads no asyncio
        self._fd: int | None = None

    @property
    def _local(self) -> asyncio.Lock:
        if self._lock is None:
            import asyncio

            self._lock = asyncio.Lock()
        return self._lock

    def locked(self) -> bool:
        return self._lock is not None and self._lock.locked()

    async def __aenter__(self) -> MutationLock:
        import asyncio

        await self._local.acquire()
        try:
            d = self._workspace.ensure_state_dir() / "locks"
            d.mkdir(exist_ok=True)
            fd = os.open(d / "mutation.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(self.POLL_S)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        except BaseException:
            self._local.release()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
        self._local.release()


class Workspace:
    def __init__(self, root: Path, granted: list[Path] | None = None) -> None:
        self.root = root.resolve()
        self.granted = [g.resolve() for g in (granted or [])]
        self._root_text = str(self.root)
        self._granted_inside = any(g.is_relative_to(self.root) for g in self.granted)
        # One mutation lock per workspace, within this process and across processes: file
        # mutations validate every affected file and write under it, so no two edits interleave.
        self.mutation_lock = MutationLock(self)

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    def ensure_state_dir(self) -> Path:
        d = self.state_dir
        d.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:  # never through a link planted in its place
            fd = os.open(d / ".gitignore", flags, 0o644)
        except FileExistsError:
            return d
        try:
            os.write(fd, _STATE_GITIGNORE.encode())
        finally:
            os.close(fd)
        return d

    def roots(self) -> list[Path]:
        return [self.root, *self.granted]

    def is_inside(self, p: Path) -> bool:
        return any(p == r or p.is_relative_to(r) for r in self.roots())

    def resolve(self, raw: str, *, field: str = "path") -> Path:
        """Resolve a model-given path (relative to the root, or absolute) and refuse one outside
        the workspace and the granted directories. Symlinks are resolved before the check, once:
        every later open goes through ``safefs`` on the resolved path and follows no link again."""
        if not isinstance(raw, str) or raw == "":
            raise Refused(BlockKind.invalid_arguments, f"argument '{field}': give a non-empty path.")
        if "\x00" in raw:
            raise Refused(BlockKind.invalid_arguments, f"argument '{field}': a path cannot contain a NUL byte.")
        check_name_lengths(raw, field)
        p = Path(os.path.expanduser(raw))
        resolved = self._below_root(p) if not p.is_absolute() else None
        if resolved is None:
            resolved = _realpath(p if p.is_absolute() else self.root / p, raw, field)
        if not self.is_inside(resolved):
            raise Refused(
                BlockKind.denied,
                f"argument '{field}': {raw!r} is outside the workspace {self.root}"
                + (f" and the granted directories {[str(g) for g in self.granted]}" if self.granted else "")
                + ". Use a path inside it, or grant the directory in the config (workspace.granted_dirs).",
            )
        return resolved

    def target(self, resolved: Path, *, field: str = "path") -> safefs.Target:
        """The no-follow handle of a resolved path: components below the deepest root holding it."""
        return safefs.target(self.roots(), resolved, field)

    def locate(self, raw: str, *, field: str = "path") -> tuple[Path, safefs.Target]:
        """resolve() and target() in one: the real path, and how to open it without following links."""
        plain = self._locate_plain(raw, field)
        if plain is not None:
            return plain
        resolved = self.resolve(raw, field=field)
        return resolved, self.target(resolved, field=field)

    def _locate_plain(self, raw: str, field: str) -> tuple[Path, safefs.Target] | None:
        """locate() of the usual path, in plain string work: relative, no '~', no '..', no link
        among its components, and no granted directory inside the root (which would be the deeper
        root of the Target). What resolve() and target() would say, checked by the same lstat walk
        as _below_root(); anything else returns None and takes the general way."""
        if not isinstance(raw, str) or not raw or raw[0] in "/~" or "\x00" in raw or self._granted_inside:
            return None
        parts = tuple(p for p in raw.split("/") if p and p != ".")
        if not parts or ".." in parts:
            return None
        check_name_lengths(raw, field)
        text = self._walk(parts)
        if text is None:
            return None
        return Path(text), safefs.Target(self.root, parts, field)

    def _below_root(self, rel: Path) -> Path | None:
        """The common case, fast: a relative path with no '..' whose components below the (already
        real) root are not symlinks resolves to root/rel with one lstat per component. Anything else
        (a '..', a symlink) returns None and takes os.path.realpath."""
        parts = tuple(q for q in rel.parts if q not in ("", "."))
        if ".." in parts:
            return None
        text = self._walk(parts)
        return Path(text) if text is not None else None

    def _walk(self, parts: tuple[str, ...]) -> str | None:
        """root/parts as text when no component below the root is a link (one lstat each; nothing
        below a missing component can be one), else None."""
        cur = self._root_text
        for i, part in enumerate(parts):
            cur = f"{cur}/{part}" if cur != "/" else f"/{part}"
            try:
                mode = os.lstat(cur).st_mode
            except FileNotFoundError:
                return "/".join((cur, *parts[i + 1 :]))
            except OSError:
                return None
            if stat.S_ISLNK(mode):
                return None
        return cur

    def location_forms(self, resolved: Path) -> tuple[str, ...]:
        """How permission patterns see a resolved location: relative to the root (as shown to the
        model) and absolute."""
        shown = self.display(resolved)
        return (shown,) if shown == str(resolved) else (shown, str(resolved))

    def subject_forms(self, raw: str, *, field: str = "path") -> tuple[str, ...]:
        """A model-given path as permission patterns see it: as given, and the location it resolves
        to now (``location_forms``). A path that does not resolve (outside, invalid) is only the
        text given: the tool refuses it when it runs."""
        try:
            resolved = self.resolve(raw, field=field)
        except Refused:
            return (raw,)
        return tuple(dict.fromkeys((raw, *self.location_forms(resolved))))

    def display(self, p: Path) -> str:
        """How a path is shown to the model: relative to the root when inside it."""
        text, base = str(p), self._root_text
        if text == base:
            return "."
        if base != "/" and text.startswith(base) and text[len(base)] == "/":
            return text[len(base) + 1 :]
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)


def check_name_lengths(raw: str, field: str) -> None:
    """A component over NAME_MAX or a path over PATH_MAX is invalid arguments naming the field."""
    try:
        whole = os.fsencode(raw)
    except UnicodeEncodeError:
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': the path holds a lone surrogate, which no name can carry.",
        ) from None
    if len(whole) > limits.PATH_MAX_BYTES:
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': the path is {len(whole)} bytes; a path holds at most {limits.PATH_MAX_BYTES} bytes.",
        )
    for part in whole.split(b"/"):
        if len(part) > limits.PATH_NAME_MAX_BYTES:
            name = os.fsdecode(part)
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument '{field}': the name {name[:40]!r}... is {len(part)} bytes; a file or directory name holds "
                f"at most {limits.PATH_NAME_MAX_BYTES} bytes. Use a shorter name.",
            )


def _realpath(joined: Path, raw: str, field: str) -> Path:
    """os.path.realpath, tolerant of a link swapped while it runs (readlink of a name that stopped
    being a link raises): tried again a few times, then refused. A link loop is invalid arguments."""
    last = 0
    for _ in range(8):
        try:
            return Path(os.path.realpath(joined, strict=True))
        except FileNotFoundError:
            try:
                return Path(os.path.realpath(joined))
            except OSError:
                continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise Refused(
                    BlockKind.invalid_arguments,
                    f"argument '{field}': {raw!r} goes through a symbolic link loop (a link that points back to "
                    "itself); it names no file. Name the real path.",
                ) from None
            last = e.errno or 0
            continue
    if last == errno.ENOTDIR:
        # Not a race: a component the path goes through is a file (nothing can be below it).
        blocker = next((q for q in reversed(joined.parents) if q.exists() and not q.is_dir()), None)
        what = f"{str(blocker)!r} is" if blocker is not None else "one of its parent components is"
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {raw!r} goes through a file: {what} a file, not a directory, so nothing can be "
            "below it. Name a path whose parents are directories (or remove or rename that file first).",
        )
    raise Refused(
        BlockKind.denied,
        f"argument '{field}': {raw!r} kept changing while it was resolved (a symbolic link swapped in and out); "
        "nothing was done. Try again when it holds still.",
    )

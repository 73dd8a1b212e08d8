"""Running ripgrep with typed arguments, bounded output and cancellation, and reading what its
errors say. Finding it is ``rg_discovery``'s."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zuno import limits
from zuno.tools.search.rg_discovery import Rg, RgLocator, shared_rg_env

if TYPE_CHECKING:
    from zuno.tools.search.confine import Confinement


class OutputTooLarge(Exception):
    def __init__(self, seen: int) -> None:
        super().__init__(seen)
        self.seen = seen


@dataclass(slots=True)
class RgResult:
    returncode: int
    stderr: bytes
    stdout_bytes: int
    confined: bool = False  # rg ran confined (confine.py)
    confinement: str | None = None  # how: "mount-namespace" or "landlock" (confine.KINDS)


@dataclass(slots=True)
class _Stderr:
    kept: bytearray = field(default_factory=bytearray)

    def add(self, chunk: bytes) -> None:
        room = limits.RG_STDERR_KEEP_BYTES - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.returncode is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover
            proc.kill()
    except ProcessLookupError:
        pass
    except PermissionError:  # the process changed identity (a privilege-dropping wrapper); kill it directly
        with contextlib.suppress(ProcessLookupError, PermissionError):
            proc.kill()


# rg's stdout pipe is widened to this (F_SETPIPE_SZ, Linux): rg then writes up to 1 MiB before it
# waits for Zuno, instead of 64 KiB round trips between the two.
RG_PIPE_BYTES = 1 << 20
# One read takes at most this (up to _READS_PER_WAKE of them a wake): a 1 MiB read allocates a
# buffer the kernel may fault in page by page when rg writes fast (hundreds of minor faults per
# dense grep in some runs), and glob's collector works on smaller pieces anyway.
_READ_BYTES = 256 * 1024
# Reads of one readiness callback: then the event loop runs again (a cancellation gets through).
_READS_PER_WAKE = 4
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
# Reading pauses (see _Drain) while rg writes often, so its writes pile up in the pipe and are
# taken in a few reads instead of a wake each. Small pieces (grep's records): for _PAUSE_S after a
# read under _SMALL_WRITE less than a quarter of it after the previous one, if at that read's rate
# a pause fills at most _PAUSE_BYTES of the 1 MiB pipe. Blocks (glob's paths, 8 KiB at a time):
# once the pipe is empty, after a read less than a quarter _PAUSE_S after the previous one, for as
# long as _BLOCK_GATHER_BYTES take at the average rate since the first read, if that is between
# _BLOCK_PAUSE_MIN_S (a faster writer is read as it comes) and _BLOCK_PAUSE_MAX_S (a slower one
# would gather too few blocks for a pause to save wakes). A pause that ends with data is taken
# again. A pause never starts with data left in the pipe, so rg never waits for a full one.
_PAUSE_S = 0.004
_PAUSE_BYTES = 256 * 1024
_BLOCK_GATHER_BYTES = 128 * 1024
_BLOCK_PAUSE_MIN_S = 0.002
_BLOCK_PAUSE_MAX_S = 0.008
_SMALL_WRITE = 4096


def _stdout_pipe() -> tuple[int, int]:
    """A pipe for rg's stdout: (read end, write end), neither inherited (os.pipe), the read end
    non-blocking. It is widened (_widen) once rg runs."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    return r, w


def _widen(fd: int) -> bool:
    """Widen the pipe of ``fd`` (either end) to RG_PIPE_BYTES; whether it was. Done through the read
    end while rg starts: a pipe may grow with data in it, and it holds at most the 64 KiB it had."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            return bool(fcntl.fcntl(fd, _F_SETPIPE_SZ, RG_PIPE_BYTES) >= RG_PIPE_BYTES)
    return False  # pragma: no cover - not Linux


class _Drain:
    """Reads the non-blocking pipe ``fd`` to its end from the event loop, each chunk straight into
    ``take`` (no stream buffer between them: one copy, out of the kernel). ``done`` is done at end
    of file, or failed with what ``take`` raised (OutputTooLarge, or the collector's own error);
    ``close()`` unhooks it from the loop (before its descriptors are closed).

    With ``exited_fd`` (a pidfd of the writer), reading pauses when the writer writes often but
    not fast: for ``_PAUSE_S`` after the first read of a wake for small pieces (rg's grep writes
    each file's records apart); once the pipe is empty, for as long as ``_BLOCK_GATHER_BYTES``
    take at the writer's average rate, for blocks (rg's glob writes 8 KiB of paths at a time, one
    wake each without the pause). Its writes pile up in the pipe and are taken in a
    few reads, instead of one wake of the event loop each. A writer that writes rarely is read as
    before (a pause would only add a wake), and one that writes fast is read without pausing, so
    it never waits for a full pipe. The pause ends early when the writer exits (its pidfd turns
    readable), so the end of the output is never waited for; after the exit the pipe is read to
    its end without pausing."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, take: Callable[[bytes], None], exited_fd: int | None = None
    ) -> None:
        self.loop = loop
        self.fd = fd
        self.take = take
        self.exited_fd = exited_fd
        self.exited = exited_fd is None
        self.timer: asyncio.TimerHandle | None = None
        self.last = loop.time()  # when the pipe was last read
        self.first = 0.0  # when it was first read
        self.read = 0  # bytes read since the first read
        self.pause = _PAUSE_S  # the length of the last pause
        self.done: asyncio.Future[None] = loop.create_future()
        self.closed = False  # unhooked from the loop for good (close())
        loop.add_reader(fd, self._readable)
        if exited_fd is not None:
            loop.add_reader(exited_fd, self._writer_exited)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.fd)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.exited and self.exited_fd is not None:
            self.exited = True
            self.loop.remove_reader(self.exited_fd)

    def _finish(self, exc: BaseException | None = None) -> None:
        self.close()
        if not self.done.done():
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)

    def _readable(self, resumed: bool = False) -> None:
        now = self.loop.time()
        span, self.last = now - self.last, now
        try:
            got = 0
            for i in range(_READS_PER_WAKE):
                try:
                    chunk = os.read(self.fd, _READ_BYTES)
                except BlockingIOError:
                    break
                if not chunk:
                    self._finish()
                    return
                self.take(chunk)
                got += len(chunk)
                if self.first:
                    self.read += len(chunk)
                else:
                    self.first = now
                if i == 0 and not self.exited and len(chunk) < _READ_BYTES:  # the pipe is empty now
                    # Small pieces written often, or a pause that ended with data: pause (again).
                    often = resumed or (span < _PAUSE_S / 4 and len(chunk) < _SMALL_WRITE)
                    pause = self.pause if resumed else _PAUSE_S
                    if often and len(chunk) * pause < _PAUSE_BYTES * span:
                        self._pause(pause)
                        return
            else:
                return  # more may be waiting: the loop calls again
            if got and not self.exited and span < _PAUSE_S / 4 and now > self.first and self.read:
                # Blocks written often: the pipe is empty now. The pause gathers _BLOCK_GATHER_BYTES
                # at the average rate since the first read, if that takes 2 to 8 ms.
                pause = _BLOCK_GATHER_BYTES * (now - self.first) / self.read
                if _BLOCK_PAUSE_MIN_S <= pause <= _BLOCK_PAUSE_MAX_S:
                    self._pause(pause)
        except BaseException as e:
            self._finish(e)

    def _pause(self, seconds: float) -> None:
        self.pause = seconds
        self.loop.remove_reader(self.fd)
        self.timer = self.loop.call_later(seconds, self._resume)

    def _resume(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.done.done() or self.closed:
            return
        self.loop.add_reader(self.fd, self._readable)
        self._readable(resumed=True)

    def _writer_exited(self) -> None:
        self.exited = True
        assert self.exited_fd is not None
        self.loop.remove_reader(self.exited_fd)
        if self.timer is not None:
            self._resume()


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (Linux 5.3+): readable once the process has exited. None elsewhere."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:  # pragma: no cover - not Linux
        return None
    try:
        return int(opener(pid))
    except OSError:  # pragma: no cover - a kernel without pidfds
        return None


async def _exit_status(proc: subprocess.Popen[bytes], pidfd: int | None, *, close: bool = False) -> int:
    """Wait for ``proc`` to exit and reap it: its pidfd turns readable in the event loop (no waiter
    thread per process, no child watcher); without a pidfd a thread waits. ``close`` closes the
    pidfd when done."""
    try:
        if pidfd is None:  # pragma: no cover - not Linux
            return await asyncio.to_thread(proc.wait)
        loop = asyncio.get_running_loop()
        while (rc := proc.poll()) is None:
            ready: asyncio.Future[None] = loop.create_future()

            def exited(ready: asyncio.Future[None] = ready) -> None:
                if not ready.done():
                    ready.set_result(None)

            loop.add_reader(pidfd, exited)
            try:
                await ready
            finally:
                loop.remove_reader(pidfd)
        return rc
    finally:
        if close and pidfd is not None:
            os.close(pidfd)


def spawn(
    path: str, argv: list[str], cwd: str, stdout: int, stderr: int, stdin: int = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """Start rg (vfork + exec, descriptors closed): stdin /dev/null (or the descriptor of it given),
    its own process group (killed whole on a cancellation) in this process's session. Not a session
    of its own: where the scheduler groups tasks by session (autogroup, on by default on many
    kernels), a new session puts rg's threads in a group of their own that gets one share of the
    CPUs against Zuno's, and rg took ~20% more CPU and wall time than the same rg run in the session
    (benchmarks.md, "rg's session")."""
    return subprocess.Popen(
        [path, *argv],
        cwd=cwd,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=shared_rg_env(),  # Popen only reads it
        process_group=0,
    )


async def _discard(proc: subprocess.Popen[bytes]) -> None:
    """An rg whose start a cancellation waited for: killed and reaped."""
    _kill_group(proc)
    await _exit_status(proc, None)


async def run_rg(
    rg: Rg,
    argv: list[str],
    cwd: str,
    feed: Callable[[bytes], None],
    *,
    locator: RgLocator | None = None,
    max_output: int = limits.RG_MAX_OUTPUT_BYTES,
    confinement: Confinement | None = None,
) -> RgResult:
    """Run rg, streaming stdout into ``feed``. Output past ``max_output`` kills rg and raises
    OutputTooLarge. Cancellation kills rg's process group and reaps it before propagating.
    With ``confinement``, rg starts confined (``confine.py``: its own view, or a Landlock domain).

    rg's pipes and its exit (a pidfd) are watched by the event loop directly: no asyncio
    subprocess transport, no stream objects, no task per pipe and no waiter thread per process."""
    loop = asyncio.get_running_loop()
    r, w = _stdout_pipe()
    er, ew = os.pipe()
    os.set_blocking(er, False)
    try:
        if confinement is None:
            proc = spawn(rg.path, argv, cwd, w, ew)
        else:
            # Not cancellable half-way (the thread uses the pipe ends until rg runs).
            proc = await confinement.start_whole(lambda stdin: spawn(rg.path, argv, cwd, w, ew, stdin), _discard)
    except BaseException:
        os.close(r)
        os.close(er)
        raise
    finally:
        os.close(w)
        os.close(ew)
    widened = _widen(r)
    pidfd = _pidfd(proc.pid)
    if locator is not None:
        locator.running.add(proc.pid)
    err = _Stderr()
    seen = 0

    def take(chunk: bytes) -> None:
        nonlocal seen
        seen += len(chunk)
        if seen > max_output:
            _kill_group(proc)
            raise OutputTooLarge(seen)
        feed(chunk)

    out = _Drain(loop, r, take, pidfd if widened else None)
    err_drain = _Drain(loop, er, err.add)
    try:
        await out.done
        await err_drain.done
        rc = await _exit_status(proc, pidfd)
        confined = confinement is not None and confinement.confined
        return RgResult(rc, bytes(err.kept), seen, confined, confinement.kind if confined and confinement else None)
    finally:
        for fd, drain in ((r, out), (er, err_drain)):
            drain.close()
            os.close(fd)
            fut = drain.done
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: a second failure is not reported as "never retrieved"
            else:
                fut.cancel()
        if proc.returncode is None:
            _kill_group(proc)
            # Reap it even while being cancelled: no zombie rg outlives its call.
            reaper = asyncio.ensure_future(_exit_status(proc, pidfd, close=True))
            with contextlib.suppress(BaseException):
                await asyncio.shield(reaper)
        elif pidfd is not None:
            os.close(pidfd)
        if locator is not None:
            locator.running.discard(proc.pid)


# ------------------------------------------------------------------------------------------------
# Classifying rg's failures

_GLOB_ERR = re.compile(r"error parsing glob '((?:[^'\\]|\\.)*)'")
# rg's per-path diagnostic: "rg: PATH: Permission denied (os error 13)" or
# "rg: PATH: IO error for operation on PATH: ... (os error N)". PATH may itself contain ": ".
_PATH_ERR_IO = re.compile(r"^rg: (?P<p>.*): IO error for operation on (?P=p): .*\(os error \d+\)$")
_PATH_ERR = re.compile(r"^rg: (?P<p>.*): [A-Z][^:]*\(os error \d+\)$")


# rg's refusal of a pattern that can match a line terminator: "\n" always (it matches line by line),
# "\r" under --crlf (grep's default, so that "$" ends a CRLF file's lines).
_LITERAL_NEWLINE = 'rg: the literal "\\n" is not allowed in a regex'
_LITERAL_CR = 'rg: the literal "\\r" is not allowed in a regex'


@dataclass(frozen=True, slots=True)
class PatternError:
    kind: str  # regex | glob | size | newline | cr
    message: str  # rg's own words, verbatim
    glob: str | None = None  # the glob rg quoted, for a glob error


def pattern_error(stderr: bytes) -> PatternError | None:
    text = stderr.decode("utf-8", "replace").strip()
    lines = [ln[4:] if ln.startswith("rg: ") else ln for ln in text.splitlines()]
    msg = "\n".join(lines).strip()
    if "error parsing glob" in text:
        m = _GLOB_ERR.search(text)
        return PatternError("glob", msg, m.group(1) if m else None)
    if "regex parse error" in text or "regex could not be compiled" in text:
        return PatternError("regex", msg)
    if "exceeds size limit" in text:
        return PatternError("size", msg)
    if text.startswith(_LITERAL_NEWLINE):
        return PatternError("newline", msg)
    if text.startswith(_LITERAL_CR):
        return PatternError("cr", msg)
    if text.startswith("rg: ") and "error:" in text and "os error" not in text:
        return PatternError("regex", msg)
    return None


def unreadable_roots(stderr: bytes) -> set[str]:
    """The paths rg said it could not read, normalised like ``norm_root``."""
    out: set[str] = set()
    for line in stderr.decode("utf-8", "surrogateescape").splitlines():
        m = _PATH_ERR_IO.match(line) or _PATH_ERR.match(line)
        if m:
            out.add(norm_root(m.group("p")))
    return out


def norm_root(p: str) -> str:
    while p.startswith("./"):
        p = p[2:]
    p = p.rstrip("/")
    return p or "."

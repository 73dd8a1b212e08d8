"""One guarded command while it runs: its capture (the reader thread, memory tail and log file),
its exit, its group's truth, and stopping it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from zuno import limits
from zuno.process import procfs
from zuno.process.command import GUARD_DIAG_PREFIX, CommandSpec, ExitInfo, StopResult
from zuno.process.tail import RingTail
from zuno.windows import Window, _skip_continuations, _utf8_cut, clamp_limit, read_window

# How long the reader waits on its pipes at most between two looks at ``seal``: a sealed capture's
# pipe is closed within this (what it reads meanwhile is dropped, never kept).
SEAL_LATENCY_S = 0.5


class RunningCommand:
    """One guarded command. Created by ``start``; safe to use from one event loop."""

    def __init__(self, spec: CommandSpec, log_path: Path, loop: asyncio.AbstractEventLoop) -> None:
        self.spec = spec
        self.log_path = log_path
        self.started_at = time.time()
        self.pid = 0
        self.pgid = 0
        self.guard_pid = 0
        self._loop = loop
        self._lock = threading.Lock()
        self._tail = RingTail(limits.PROCESS_MEMORY_TAIL, limits.PROCESS_READ_CHUNK)
        self._total = 0
        self._logged = 0  # bytes in the log file: short of _total only when writing it failed
        self._last_output_at = self.started_at
        self._exit: ExitInfo | None = None
        self._group_gone = False
        self._guard_lost = False
        self._leader: tuple[int, int] | None = None
        self._members: list[tuple[int, int]] = []
        self._diag: tuple[int, str] | None = None
        self._stop_reason: str | None = None
        self._capture_error: str | None = None
        self._capture_open = True
        self._closing = False
        # Sealed: the capture is final (its job settled, or the command was released). Bytes read
        # after that are dropped and the reader closes its end of the pipe (``seal``).
        self._sealed = False
        self._seal_lock = threading.Lock()
        self.pipe_inode = 0  # the capture pipe's inode (what a process still holding it shows in /proc)
        self._spawned = asyncio.Event()
        self._exited = asyncio.Event()
        self._group_event = asyncio.Event()
        self._capture_done = asyncio.Event()
        self._output_waiters: list[asyncio.Future[None]] = []
        self._want_output = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._log_fd = -1
        self.exited_at: float | None = None
        self.group_exited_at: float | None = None
        # Why a stop first signalled the group (timeout, cancel, kill, session-end); None if never
        self.signalled_by: str | None = None

    # -- facts ------------------------------------------------------------------------------------

    @property
    def total_written(self) -> int:
        return self._total

    @property
    def memory_start(self) -> int:
        """The first byte offset still held in memory."""
        with self._lock:
            return self._total - len(self._tail)

    @property
    def last_output_at(self) -> float:
        return self._last_output_at

    @property
    def exit(self) -> ExitInfo | None:
        return self._exit

    @property
    def capture_done(self) -> bool:
        return not self._capture_open

    @property
    def recorded_members(self) -> list[tuple[int, int]]:
        """(pid, start time) of the members recorded when the command's process exited."""
        return list(self._members)

    def group_alive(self) -> bool:
        """Is any member of the command's process group still alive?"""
        if self.pgid == 0 or self._group_gone:
            return False
        if self._exit is None and not self._guard_lost:
            return True
        if not self._guard_lost:
            return True  # the guard lives exactly as long as the group does
        return self._provably_ours()

    def _provably_ours(self) -> bool:
        if self.pgid == 0:
            return False
        candidates = list(self._members)
        if self._leader is not None and self._exit is None:
            candidates.insert(0, self._leader)
        return any(procfs.is_member(pid, start, self.pgid) for pid, start in candidates)

    # -- output -----------------------------------------------------------------------------------

    def window(self, cursor: int | None, limit: int | None, *, from_end: bool) -> tuple[Window, bool]:
        """One window of the capture: (window, from_disk). Without a cursor: the newest window
        ending at total_written when ``from_end``, else from byte 0."""
        lim = clamp_limit(limit)
        growing = self.group_alive()  # a character the command is still writing is not split either
        with self._lock:
            total = self._total
            mem_start = total - len(self._tail)
            aligned = False
            if cursor is None:
                start = max(0, total - lim) if from_end else 0
                aligned = from_end and start > 0
            else:
                start = min(max(0, cursor), total)
            end = min(start + lim, total)
            data = self._tail.slice(start - mem_start, end - mem_start) if start >= mem_start else None
        if data is None:
            # The log holds _logged bytes; past a failed write there is nothing more on disk to page to.
            return read_window(self.log_path, cursor, limit, from_end=from_end, total=min(total, self._logged)), True
        if aligned:
            skip = _skip_continuations(data)
            start += skip
            data = data[skip:]
        if start + len(data) < total or growing:
            data = data[: _utf8_cut(data)] or data
        return Window(data, start, start + len(data), total, lim), False

    def read_all(self) -> bytes:
        """The whole capture so far (exact bytes)."""
        total = self._total
        with open(self.log_path, "rb") as f:
            return f.read(total)

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the capture, from memory when held there."""
        with self._lock:
            mem_start = self._total - len(self._tail)
            end = min(end, self._total)
            if start >= mem_start:
                return self._tail.slice(start - mem_start, end - mem_start)
        with open(self.log_path, "rb") as f:
            f.seek(start)
            return f.read(max(0, end - start))

    # -- waiting ----------------------------------------------------------------------------------

    async def wait(self, timeout: float | None = None) -> ExitInfo | None:  # noqa: ASYNC109
        """The exit, once the command's process exited; None on timeout. Never kills."""
        if self._exit is None:
            try:
                await asyncio.wait_for(self._exited.wait(), timeout)
            except TimeoutError:
                return None
        return self._exit

    async def wait_group(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """True once the whole process group has exited; False on timeout."""
        if not self.group_alive():
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = limits.PROCESS_GUARD_LOST_POLL_S if self._guard_lost else left
            if step is not None and left is not None:
                step = min(step, left)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._group_event.wait(), step)
            if not self.group_alive():
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    async def wait_capture(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """True once the capture pipe reached end-of-file (every writer closed it)."""
        if not self._capture_open:
            return True
        try:
            await asyncio.wait_for(self._capture_done.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_output(self, after: int, timeout: float | None) -> bool:  # noqa: ASYNC109
        """Wait until more than ``after`` bytes were captured, the command exited, or timeout.
        True when there is new output."""
        if self._total > after:
            return True
        if self._exit is not None and not self._capture_open:
            return False
        fut: asyncio.Future[None] = self._loop.create_future()
        with self._lock:
            self._output_waiters.append(fut)
            self._want_output = True
            if self._total > after:
                self._output_waiters.remove(fut)
                return True
        waits = [fut, asyncio.ensure_future(self._exited.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                if not w.done():
                    w.cancel()
            with self._lock, contextlib.suppress(ValueError):
                self._output_waiters.remove(fut)
        return self._total > after

    # -- stopping ---------------------------------------------------------------------------------

    async def stop(self, reason: str, *, grace: float | None = None) -> StopResult:
        """SIGTERM, then after ``grace`` SIGKILL, the whole group — each signal only while a recorded
        member is provably still in it. Never signals a group id the system may have reused."""
        grace = limits.PROCESS_STOP_GRACE_S if grace is None else grace
        if not self.group_alive():
            return StopResult(False, True, (), "the process group had already exited")
        sent: list[str] = []
        for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, limits.PROCESS_KILL_WAIT_S)):
            if not self.group_alive():
                break
            if not self._provably_ours():
                # The leader may have just been reaped: give the guard's exit report a moment.
                await self.wait(timeout=0.5)
                if not self._provably_ours():
                    gone = not self.group_alive() or await self.wait_group(0.2)
                    return StopResult(
                        bool(sent),
                        gone,
                        tuple(sent),
                        "the process group exited"
                        if gone
                        else "could not confirm the process group exited: no process recorded as its member "
                        "is still in it, so its id was not signalled (the system may have reused it)",
                    )
            if self._exit is None and self._stop_reason is None:
                self._stop_reason = reason  # the command's own process is being stopped: say who did it
            try:
                os.killpg(self.pgid, sig)
                sent.append(sig.name)
                self.signalled_by = self.signalled_by or reason
            except ProcessLookupError:
                break
            except PermissionError as e:
                return StopResult(bool(sent), False, tuple(sent), f"cannot signal the group: {e.strerror}")
            if await self.wait_group(wait_s):
                break
        gone = not self.group_alive()
        return StopResult(
            bool(sent),
            gone,
            tuple(sent),
            f"stopped the process group ({', '.join(sent)})" if gone else "signalled the group; members remain",
        )

    def release_memory(self) -> None:
        """Drop the in-memory tail (windows are then served from the log file). For commands that
        have ended; a running command keeps its most recent bytes in memory."""
        with self._lock:
            self._tail.drop()
            if not self._capture_open:  # no read can be filling the ring: give its pages back now
                self._tail.release_pages()

    def seal(self) -> bool:
        """Make the capture final now: ``total_written``, the memory tail and the log file keep what
        they hold at this moment, whatever still writes to the pipe. The reader drops what it reads
        after this and closes its end of the pipe (within ``SEAL_LATENCY_S``), so a
        process that left the group (setsid) and still writes there gets EPIPE / SIGPIPE instead of
        growing a finished command's log without end. True when the pipe was still open (some
        process held its write end). Idempotent."""
        with self._seal_lock:
            self._sealed = True
            return self._capture_open

    async def close(self) -> None:
        """Release the reader (after the group is gone or stopped): the capture is sealed
        (``seal``). Idempotent."""
        self.seal()
        self._closing = True
        if self._thread is not None and self._thread.is_alive():
            await asyncio.to_thread(self._thread.join, 2.0)

    # -- the reader thread ------------------------------------------------------------------------

    def _call(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(fn, *args)

    def _notify_output(self) -> None:
        with self._lock:
            waiters, self._output_waiters = self._output_waiters, []
            self._want_output = False
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _capture(self, fd: int, budget: int | None = None) -> bool:
        """Read what the pipe holds now (at most ``budget`` bytes when given); False at end-of-file.

        The pipe is read straight into the memory tail's ring, up to one read chunk per batch (a
        batch ends when the pipe is empty), and the log file is written from those same bytes in
        one system call: two copies per byte, whatever sizes the command writes in."""
        chunk = limits.PROCESS_READ_CHUNK
        tail = self._tail
        taken = 0
        while budget is None or taken < budget:
            got = 0
            open_ = True
            while got < chunk:
                try:
                    n = os.readv(fd, tail.free_views(got, chunk - got))
                except BlockingIOError:
                    break
                except OSError as e:
                    self._capture_error = f"reading the capture failed: {e.strerror}"
                    open_ = False
                    break
                if not n:
                    open_ = False
                    break
                got += n
            if got:
                with self._seal_lock:
                    if self._sealed:  # read after the capture was made final: not kept
                        return False
                    self._log(tail.views(tail.end, tail.end + got))
                    with self._lock:
                        tail.commit(got)
                        self._total += got
                        self._last_output_at = time.time()
                        notify = self._want_output
                if notify:
                    self._call(self._notify_output)
                taken += got
            if tail.dropped:
                tail.release_pages()
            if not open_:
                return False
            if got < chunk:
                break
        return True

    def _log(self, views: list[memoryview]) -> None:
        """Append the views to the log file (unless writing it already failed)."""
        if self._capture_error is None:
            try:
                while views:
                    written = os.writev(self._log_fd, views)
                    self._logged += written
                    while views and written >= len(views[0]):
                        written -= len(views[0])
                        views.pop(0)
                    if views and written:
                        views[0] = views[0][written:]
            except OSError as e:
                self._capture_error = f"writing the log {self.log_path} failed: {e.strerror}"

    def _capture_ended(self) -> None:
        with self._lock:  # release_memory decides under this lock who gives the ring's pages back
            self._capture_open = False
            if self._tail.dropped:
                self._tail.release_pages()

    def _on_status(self, line: str, drain: Callable[[int | None], None]) -> None:
        parts = line.split(" ", 3)
        kind = parts[0]
        if kind == "guard" and len(parts) >= 2:
            self.guard_pid = int(parts[1])
        elif kind == "spawned" and len(parts) >= 3:
            self.pid = self.pgid = int(parts[1])
            self._leader = (self.pid, int(parts[2]))
            self._call(self._spawned.set)
        elif kind == "diag" and len(parts) >= 3:
            self._diag = (int(parts[1]), line.split(" ", 2)[2])
        elif kind == "exit" and len(parts) >= 4:
            # Everything the command's process wrote is in the pipe by now, so at most a pipe's worth
            # is read here (a lingering member may be writing without end).
            drain(limits.PROCESS_PIPE_SIZE + limits.PROCESS_READ_CHUNK)
            rc = None if parts[1] == "-" else int(parts[1])
            sig = None if parts[2] == "-" else int(parts[2])
            members = []
            if parts[3] != "-":
                for item in parts[3].split(","):
                    p, _, s = item.partition(":")
                    members.append((int(p), int(s)))
            self._members = members
            if not members:  # no member was left when the command's process exited: the group is gone
                self._group_gone = True
                self.group_exited_at = time.time()
                self._call(self._group_event.set)
            self._set_exit(ExitInfo(rc, sig, None, self._capture_error is None, self._stop_reason))
        elif kind == "gone":
            self._group_gone = True
            self.group_exited_at = time.time()
            self._call(self._group_event.set)

    def _set_exit(self, info: ExitInfo) -> None:
        if self._exit is not None:
            return
        if info.killed_by is None and self._stop_reason is not None and info.guard_diagnostic is None:
            info = ExitInfo(info.returncode, info.signal, None, info.settled, self._stop_reason)
        self._exit = info
        self.exited_at = time.time()
        self._call(self._exited.set)
        self._call(self._notify_output)

    def _pump(self, cap_fd: int, status_fd: int) -> None:
        sel = selectors.DefaultSelector()
        sel.register(cap_fd, selectors.EVENT_READ, "cap")
        sel.register(status_fd, selectors.EVENT_READ, "status")
        pending = b""
        status_open = True
        with contextlib.suppress(OSError):
            self.pipe_inode = os.fstat(cap_fd).st_ino

        cap_closed = False

        def end_capture() -> None:
            nonlocal cap_closed
            self._capture_ended()
            sel.unregister(cap_fd)
            with contextlib.suppress(OSError):  # a writer still holding the pipe gets EPIPE / SIGPIPE
                os.close(cap_fd)
            cap_closed = True
            self._call(self._capture_done.set)
            self._call(self._notify_output)

        def drain(budget: int | None = None) -> None:
            if self._capture_open and not self._capture(cap_fd, budget):
                end_capture()

        try:
            while self._capture_open or status_open:
                if self._sealed and self._capture_open:
                    end_capture()
                    continue
                for key, _ in sel.select(timeout=SEAL_LATENCY_S):
                    if key.data == "cap":
                        # A budget, so a group member that keeps the pipe full cannot keep the status
                        # pipe (the leader's exit, the group's end) from being read.
                        drain(limits.PROCESS_DRAIN_BUDGET)
                    else:
                        try:
                            data = os.read(status_fd, 4096)
                        except OSError:
                            data = b""
                        if data:
                            pending += data
                            while b"\n" in pending:
                                raw, pending = pending.split(b"\n", 1)
                                self._on_status(raw.decode("utf-8", "replace"), drain)
                        else:
                            status_open = False
                            sel.unregister(status_fd)
                            self._on_guard_exit(drain)
                if self._closing and not status_open:
                    break
        finally:
            sel.close()
            if self._capture_open:
                self._capture_ended()
                self._call(self._capture_done.set)
            for fd in (status_fd, self._log_fd) if cap_closed else (cap_fd, status_fd, self._log_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _on_guard_exit(self, drain: Callable[[int | None], None]) -> None:
        rc = self._proc.wait() if self._proc is not None else None
        if self._exit is None:
            drain(limits.PROCESS_PIPE_SIZE + limits.PROCESS_READ_CHUNK)
            if self._diag is not None:
                code, line = self._diag
                # the guard sends a diag only before the exec, so no spawned line can precede it
                self._set_exit(ExitInfo(code, None, line, True, None, never_started=self._leader is None))
            else:
                self._set_exit(
                    ExitInfo(
                        125,
                        None,
                        f"{GUARD_DIAG_PREFIX} 125: the guard exited unexpectedly (status {rc}); "
                        "whether the command ran, and what it changed, is unknown",
                        False,
                        self._stop_reason,
                    )
                )
        if not self._group_gone:
            if self.pgid and self._provably_ours():
                self._guard_lost = True
            else:
                self._group_gone = True
                self.group_exited_at = time.time()
        self._call(self._spawned.set)
        self._call(self._group_event.set)

    def _fail(self, text: str) -> None:
        """The guard could not even be started: exit 125 with the guard's diagnostic."""
        line = f"{GUARD_DIAG_PREFIX} 125: {text}"
        with contextlib.suppress(OSError):
            data = (line + "\n").encode()
            self._logged += os.write(self._log_fd, data)
            with self._lock:
                self._tail.add(data)
                self._total += len(data)
        with contextlib.suppress(OSError):
            os.close(self._log_fd)
        self._capture_open = False
        self._group_gone = True
        self._exit = ExitInfo(125, None, line, True, None, never_started=True)
        self.exited_at = time.time()
        for ev in (self._spawned, self._exited, self._group_event, self._capture_done):
            ev.set()

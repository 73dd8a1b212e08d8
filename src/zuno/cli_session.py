"""How a zuno command that runs calls drives its session: input read as UTF-8 JSON with one-line
errors, the session resolved from --session / -c / --new-session, and SIGINT / SIGTERM turned into
a cancelled step that still settles every call, then exit 130 / 143.

A first Ctrl-C (or a SIGTERM) cancels the step in progress: running calls settle with what they
have, calls not started do not start, the records are printed, and the command exits 130 (143).
A second Ctrl-C abandons the step at once (exit 130; the next run of the session reports what was
left unsettled as uncertain).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.cli_support import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    UsageError,
    runtime_from_args,
    session_from_args,
)

if TYPE_CHECKING:  # the runtime (and the config models) load when a command builds its runtime
    from zuno.runtime import Session


def read_input_bytes(source: str | None, what: str) -> tuple[bytes, str]:
    """The bytes of a batch/steps input (a file, or - for standard input), and where they came from."""
    if source in (None, "-"):
        return sys.stdin.buffer.read(), "standard input"
    p = Path(source)
    if p.is_dir():
        raise UsageError(f"{what} {source} is a directory, not a file. Name a JSON file, or - for standard input.")
    if not p.exists():
        raise UsageError(f"{what} {source} does not exist. Check the path, or use - for standard input.")
    try:
        return p.read_bytes(), source
    except OSError as e:
        raise UsageError(f"{what} {source} cannot be read ({e.strerror}). Check its permissions.") from None


def decode_utf8(data: bytes, where: str) -> str:
    """UTF-8 text; a leading byte order mark (which some editors write) is dropped, as JSON allows."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where}: not UTF-8 text (byte {e.start} is not valid UTF-8). Send UTF-8 JSON.") from None


def parse_json(text: str, where: str) -> Any:
    """JSON text, or a UsageError naming where, the problem and the fix."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}).") from None
    except RecursionError:
        raise UsageError(f"{where}: the JSON is nested too deeply to read. Send calls with flat arguments.") from None


def read_calls(source: str | None) -> list[Any]:
    data, where = read_input_bytes(source, "batch file")
    calls = parse_json(decode_utf8(data, where), where)
    if not isinstance(calls, list):
        from zuno.config import json_type_name

        one = " (one call: wrap it in [ ])" if isinstance(calls, dict) else ""
        raise UsageError(f"{where}: a batch is a JSON array of calls, not {json_type_name(calls)}{one}.")
    return calls


class StopSignals:
    """SIGINT / SIGTERM while a session runs: the first cancels the step (and calls the
    listeners, e.g. ``zuno steps`` ends its input); ``status`` is then the exit status."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.status: int | None = None
        self.listeners: list[Callable[[], None]] = []

    def _on(self, status: int) -> None:
        if self.status is not None:
            if status == EXIT_INTERRUPTED:  # Ctrl-C again: abandon the step
                print("zuno: abandoned", file=sys.stderr)
                os._exit(EXIT_INTERRUPTED)
            return
        self.status = status
        what = "interrupted" if status == EXIT_INTERRUPTED else "terminated"
        hint = " (Ctrl-C again to abandon it)" if status == EXIT_INTERRUPTED else ""
        print(f"\nzuno: {what}: cancelling the step{hint}", file=sys.stderr)
        self.session.cancel()
        for listener in self.listeners:
            listener()

    @contextlib.contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop) -> Iterator[StopSignals]:
        from zuno.store.connection import add_deferring_handler

        signals = ((signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, EXIT_TERMINATED))
        added = []
        for sig, status in signals:
            before = signal.getsignal(sig)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                # (noted until the loop runs: a store wait that keeps it from running ends at once)
                add_deferring_handler(loop, sig, self._on, status)
                added.append((sig, before))
        try:
            yield self
        finally:
            for sig, before in added:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
                if before is not None:  # the loop restores the default; put back what was there
                    with contextlib.suppress(ValueError, TypeError):
                        signal.signal(sig, before)


Body = Callable[["Session", StopSignals], Awaitable[int]]


@contextlib.contextmanager
def _deferring_sigint(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """The SIGINT handler in place (asyncio.run's, whose first Ctrl-C cancels the main task on the
    loop) chained with ``defer_to_loop`` for the block, so a store wait in it ends at once."""
    from zuno.store.connection import defer_to_loop

    before = signal.getsignal(signal.SIGINT)
    if not callable(before) or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.signal(signal.SIGINT, defer_to_loop(loop, before))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


async def with_session(args: argparse.Namespace, body: Body) -> int:
    """Build the runtime, resolve and open the session, run body, close; the exit status is body's
    unless a signal stopped it. (A Ctrl-C before the session's handlers are in, or after they are
    gone, still ends a store wait: ``_deferring_sigint``; resolving ``-c`` reads the store.)"""
    with _deferring_sigint(asyncio.get_running_loop()):
        return await _with_session(args, body)


async def _with_session(args: argparse.Namespace, body: Body) -> int:
    rt = runtime_from_args(args)
    try:
        session = rt.session(session_from_args(rt, args))
        stop = StopSignals(session)
        with stop.installed(asyncio.get_running_loop()):
            await session.open()
            try:
                status = await body(session, stop) if stop.status is None else stop.status
            finally:
                from zuno.jobs import JobManager

                jobs = session.services.peek(JobManager)
                await session.close()
                for note in jobs.exit_notes() if jobs is not None else []:
                    print(note, file=sys.stderr)
        return stop.status if stop.status is not None else status
    finally:
        await rt.aclose()


def run(args: argparse.Namespace, body: Body) -> int:
    return asyncio.run(with_session(args, body))

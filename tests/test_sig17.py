"""Signals during store waits, remaining gaps (seventeenth round).

1. ``zuno mcp``'s shutdown handlers (the loop's own, for SIGINT and SIGTERM) did not chain
   ``defer_to_loop``: a signal that came while the server was on its way into a store wait (the
   loop not running, the wait not begun) was seen only once that wait had run its whole length.
   Here the server's own process sends the signal right before the write that meets the lock, so
   it lands there for certain.
2. A signal in the first slice of a store wait (its first 25 ms) was taken, before the wait's own
   noting handler was installed, by whichever handler was in place: one that neither raises nor
   defers to the loop (an embedding program's ``loop.add_signal_handler``) let that wait run its
   whole length. Now the first try does not wait, so the whole wait is spent with the handler in.
   The slice is made long here, and the signal sent a fifth of a slice after the statement began
   (its trace callback starts the timer), so it lands in the first slice for certain.

All real: ``zuno mcp`` in a process of its own over stdio JSON-RPC, the store's write lock held by
the test (``BEGIN IMMEDIATE`` on the same file), real signals. Times are compared with the
configured wait only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.store import connection
from zuno.store.connection import StoreConnection, StoreWaitInterrupted

from conftest import zuno_env

WAIT_MS = 6000  # the whole busy wait of the server under test: an interrupted one ends in under half

# ``zuno mcp`` with its wait set; once ``armed`` exists, the next transaction it begins (the one
# that meets the lock the test holds) is preceded by the signal, sent by the server to itself.
SERVER = (
    "import os, signal, sys\n"
    "import zuno.store.connection as c\n"
    "c.BUSY_TIMEOUT_MS = {ms}\n"
    "_execute = c.StoreConnection.execute\n"
    "def execute(self, *args):\n"
    "    if args and str(args[0]).startswith('BEGIN') and os.path.exists({armed!r}):\n"
    "        os.remove({armed!r})\n"
    "        print('test: signalled before the write', file=sys.stderr, flush=True)\n"
    "        os.kill(os.getpid(), {signum})\n"
    "    return _execute(self, *args)\n"
    "c.StoreConnection.execute = execute\n"
    "from zuno.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _handshake(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    proc.stdin.flush()
    line = proc.stdout.readline()
    assert line, proc.communicate()
    assert json.loads(line)["id"] == 0, line


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_zuno_mcp_ends_at_once_on_a_signal_that_comes_as_its_call_meets_the_lock(
    workspace: Path, tmp_path: Path, signum: int, status: int
) -> None:
    armed = tmp_path / "armed"
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(ms=WAIT_MS, armed=str(armed), signum=int(signum)),
         "mcp", "--root", str(workspace)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workspace, env=zuno_env(),
    )  # fmt: skip
    holder: sqlite3.Connection | None = None
    try:
        _handshake(proc)  # (the session is open: the store exists)
        holder = sqlite3.connect(workspace / ".zuno" / "zuno.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the store's write lock, held by the test
        armed.touch()
        assert proc.stdin is not None
        call = {"name": "read", "arguments": {"path": "."}}
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}))
        proc.stdin.flush()
        sent = time.monotonic()
        proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if holder is not None:
            holder.close()
        if proc.poll() is None:
            proc.kill()
        _out, err_bytes = proc.communicate()
    err = err_bytes.decode()
    assert "test: signalled before the write" in err, err  # (the call met the lock)
    assert took < WAIT_MS / 1000 / 2, f"ended {took:.2f} s after the call, with a busy wait of {WAIT_MS} ms: {err}"
    assert proc.returncode == status, err
    assert "Traceback" not in err and "internal error" not in err, err


# -- 2. a signal in the first slice, under a handler that neither raises nor defers ----------------

FIRST_SLICE_MS = 600  # long: a signal a fifth of it after the statement began is in the first


async def test_a_signal_in_the_first_slice_under_an_embedding_programs_own_handler_ends_the_wait(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", WAIT_MS)
    monkeypatch.setattr(connection, "SLICE_MS", FIRST_SLICE_MS)
    loop = asyncio.get_running_loop()
    seen: list[int] = []
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        db = rt.store._db
        assert isinstance(db, StoreConnection)
        holder = sqlite3.connect(rt.db_path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the store's write lock, held by the test
        timers: list[threading.Timer] = []

        def began(statement: str) -> None:  # (in SQLite, as a statement starts: the first write)
            if not timers and statement.lstrip().upper().startswith(("BEGIN", "INSERT", "UPDATE", "DELETE")):
                timers.append(threading.Timer(FIRST_SLICE_MS / 1000 / 5, os.kill, (os.getpid(), signal.SIGINT)))
                timers[0].start()

        loop.add_signal_handler(signal.SIGINT, seen.append, signal.SIGINT)  # the program's own
        try:
            db.set_trace_callback(began)
            started = time.monotonic()
            with pytest.raises(StoreWaitInterrupted) as caught:
                rt.store.add_event(s.id, "noted", {})
            took = time.monotonic() - started
            db.set_trace_callback(None)
            await asyncio.sleep(0.05)  # the loop runs: the program's own handler too
        finally:
            db.set_trace_callback(None)
            loop.remove_signal_handler(signal.SIGINT)
            holder.close()
            for t in timers:
                t.join()
    assert timers, "the write never began"
    assert took < WAIT_MS / 1000 / 2, f"{took:.2f} s, with a busy wait of {WAIT_MS} ms"
    assert caught.value.signum == signal.SIGINT and "(interrupted)" in str(caught.value)
    assert seen == [signal.SIGINT]

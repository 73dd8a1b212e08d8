"""``zuno mcp`` over stdio: one client, one Zuno session, for the life of the process.

stdin is read through a non-blocking pipe reader (so SIGTERM / SIGINT stop the server at once,
not after the client's next line), and fd 0 points at the null device while serving so that
nothing a call runs can read the protocol's bytes. stdout is written through a non-blocking pipe
writer on the event loop (the SDK's own writer hands every line and every flush to a worker
thread: two thread hops per response), and fd 1 points at stderr while serving, so stray output of
a call never reaches the wire. Where stdin or stdout is not a pipe (a regular file), the SDK's own
reader or writer serves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import math
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from zuno.serve.mcp.server import STDIO_IDENTITY, Frontend, build_server
from zuno.serve.mcp.wire_check import MAX_MESSAGE_BYTES, not_utf8, oversized, reject

# The longest JSON-RPC line read from the client (a large write's content).
MAX_LINE_BYTES = MAX_MESSAGE_BYTES
# How long the responses still buffered when the server stops may take to reach a client that
# does not read them; then the process exits anyway.
FINAL_FLUSH_S = 5.0


class _Lines:
    """The client's lines; one the SDK would drop without an answer is answered here instead
    (``wire_check``) and not passed on."""

    def __init__(self, reader: asyncio.StreamReader, rejected: MemoryObjectSendStream[types.JSONRPCError]) -> None:
        self._reader = reader
        self._rejected = rejected

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._readline()
            if line is None:
                continue
            if not line:
                raise StopAsyncIteration
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:  # (was decoded with U+FFFD: a write's content changed silently)
                self._rejected.send_nowait(not_utf8(e))
                continue
            error = reject(text)
            if error is None:
                return text
            self._rejected.send_nowait(error)

    async def _readline(self) -> bytes | None:
        """The next line (b"" at the end), or None for a line over MAX_LINE_BYTES: its bytes are
        dropped as they arrive (never held past the limit) and it is answered with an error."""
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:  # the last line without its newline
            return e.partial
        except asyncio.LimitOverrunError as e:
            head = await self._reader.readexactly(e.consumed)
        while True:  # drop the rest of the line, through its newline
            try:
                await self._reader.readuntil(b"\n")
                break
            except asyncio.IncompleteReadError:
                break
            except asyncio.LimitOverrunError as e:
                await self._reader.readexactly(e.consumed)
        self._rejected.send_nowait(oversized(head, MAX_LINE_BYTES))
        return None


@contextlib.asynccontextmanager
async def _stdin(rejected: MemoryObjectSendStream[types.JSONRPCError]) -> AsyncIterator[Any]:
    """A cancellable line reader over the client's stdin, or None where stdin is not a pipe."""
    loop = asyncio.get_running_loop()
    private = os.dup(0)
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    pipe = os.fdopen(private, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except (ValueError, OSError):  # a regular file or a closed descriptor: the SDK's own reader
        pipe.close()
        yield None
        return
    devnull = os.open(os.devnull, os.O_RDONLY)
    saved = os.dup(0)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        yield _Lines(reader, rejected)
    finally:
        transport.close()
        os.dup2(saved, 0)
        os.close(saved)


class _Writer:
    """The SDK's stdout interface (``write`` a line, ``flush``) over the loop's pipe transport: a
    line is handed to the transport, ``flush`` waits only while the client lags behind."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@contextlib.asynccontextmanager
async def _stdout() -> AsyncIterator[Any]:
    """A writer to the client over a private duplicate of fd 1, with fd 1 pointing at stderr while
    serving; or None where stdout is not a pipe (nothing is diverted then: the SDK does it)."""
    loop = asyncio.get_running_loop()
    try:
        private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # fd 1 is closed: the SDK's writer says so
        yield None
        return
    pipe = os.fdopen(private, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    except (ValueError, OSError):  # a regular file (it cannot be polled): the SDK's own writer
        pipe.close()
        yield None
        return
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr: the null device
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    try:
        yield _Writer(writer)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        # Every response written reaches the client before the process ends (bounded: a client that
        # stopped reading does not hold the exit).
        with contextlib.suppress(Exception):
            transport.set_write_buffer_limits(high=0)
            with anyio.move_on_after(FINAL_FLUSH_S, shield=True):
                await writer.drain()
        transport.close()


async def serve_stdio(frontend: Frontend) -> None:
    server = build_server(frontend)
    # The session is opened before the first message: a busy session or a name collision among
    # connected servers is an error at start, and recovery notices are ready for the first result.
    await frontend.client(STDIO_IDENTITY)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    rejected, to_answer = anyio.create_memory_object_stream[types.JSONRPCError](math.inf)
    async with (
        _stdin(rejected) as lines,
        _stdout() as out,
        stdio_server(stdin=lines, stdout=out) as (read_stream, write_stream),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_answer_rejected, to_answer, write_stream)
        await server.run(read_stream, write_stream, options)
        tg.cancel_scope.cancel()


async def _answer_rejected(
    errors: MemoryObjectReceiveStream[types.JSONRPCError], out: MemoryObjectSendStream[SessionMessage]
) -> None:
    """Write the error response of every line ``wire_check`` refused, through the SDK's writer (one
    line each, never interleaved with another response)."""
    async with errors:
        async for error in errors:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await out.send(SessionMessage(error))

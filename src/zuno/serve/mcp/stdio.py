"""``zuno mcp`` over stdio: one client, one Zuno session, for the life of the process.

stdin is read through a non-blocking pipe reader (so SIGTERM / SIGINT stop the server at once,
not after the client's next line), and fd 0 points at the null device while serving so that
nothing a call runs can read the protocol's bytes. stdout is the SDK's: fd 1 points at stderr
while serving, so stray output of a call never reaches the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server

from zuno.serve.mcp.server import STDIO_IDENTITY, Frontend, build_server

# The longest JSON-RPC line read from the client (a large write's content).
MAX_LINE_BYTES = 256 << 20


class _Lines:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


@contextlib.asynccontextmanager
async def _stdin() -> AsyncIterator[Any]:
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
        yield _Lines(reader)
    finally:
        transport.close()
        os.dup2(saved, 0)
        os.close(saved)


async def serve_stdio(frontend: Frontend) -> None:
    server = build_server(frontend)
    # The session is opened before the first message: a busy session or a name collision among
    # connected servers is an error at start, and recovery notices are ready for the first result.
    await frontend.client(STDIO_IDENTITY)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with _stdin() as lines, stdio_server(stdin=lines) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)

"""``zuno mcp`` over stdio: one client, one Zuno session, for the life of the process."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from zuno.serve.mcp.server import STDIO_IDENTITY, Frontend, build_server


async def serve_stdio(frontend: Frontend) -> None:
    server = build_server(frontend)
    # The session is opened before the first message: a busy session is an error at start, and
    # recovery notices are ready for the first result.
    await frontend.client(STDIO_IDENTITY)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())

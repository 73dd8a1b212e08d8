"""`zuno mcp --http` listens before it says "serving": a client that connects as soon as it reads
that line waits in the backlog until the server accepts, never refused. Under load uvicorn's own
listen() came after the line (a connect refused in the full suite); here uvicorn's startup is made
slow in the child so the window is certain."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from conftest import zuno_env

# zuno mcp with uvicorn's startup (which calls listen() on the socket it is given) delayed.
SLOW_STARTUP = (
    "import asyncio, sys\n"
    "import uvicorn.server\n"
    "_startup = uvicorn.server.Server.startup\n"
    "async def startup(self, sockets=None):\n"
    "    await asyncio.sleep(1.5)\n"
    "    return await _startup(self, sockets=sockets)\n"
    "uvicorn.server.Server.startup = startup\n"
    "from zuno.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_a_connect_right_after_serving_is_said_is_not_refused(workspace: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_STARTUP, "mcp", "--root", str(workspace), "--http", "127.0.0.1:0", "--token", "t"],
        env=zuno_env(), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert line.startswith("zuno mcp: serving http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:  # refused without the listen
            conn.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            conn.settimeout(30)
            assert conn.recv(64).startswith(b"HTTP/1.1 ")  # answered once uvicorn has started
    finally:
        proc.terminate()
        proc.wait(timeout=30)

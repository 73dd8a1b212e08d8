"""Real MCP peers for the tests: the official SDK's client driving ``zuno mcp`` as a subprocess."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import zuno_env

MODES = ["legacy", "2026-07-28"]


def zuno_mcp_params(root: Path, *extra: str, config: dict[str, Any] | None = None) -> StdioServerParameters:
    env = zuno_env({"ZUNO_CONFIG_CONTENT": json.dumps(config)} if config else None)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "zuno", "mcp", "--root", str(root), *extra], env=env, cwd=str(root)
    )


@asynccontextmanager
async def zuno_client(
    root: Path, mode: str, *extra: str, config: dict[str, Any] | None = None, **kw: Any
) -> AsyncIterator[Client]:
    async with Client(zuno_mcp_params(root, *extra, config=config), mode=mode, **kw) as client:
        yield client


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpZuno:
    """``zuno mcp --http`` as a real subprocess on a loopback port."""

    def __init__(self, root: Path, *extra: str, config: dict[str, Any] | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.extra = extra
        self.config = config
        self.proc: Any = None
        self.stderr = b""
        self.token = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def __aenter__(self) -> HttpZuno:
        import asyncio

        env = zuno_env({"ZUNO_CONFIG_CONTENT": json.dumps(self.config)} if self.config else None)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "zuno",
            "mcp",
            "--root",
            str(self.root),
            "--http",
            f"127.0.0.1:{self.port}",
            *self.extra,
            env=env,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        assert self.proc.stderr is not None
        while True:
            line = await asyncio.wait_for(self.proc.stderr.readline(), 30)
            self.stderr += line
            if not line:
                raise RuntimeError(f"zuno mcp --http died: {self.stderr.decode()}")
            if b"bearer token" in line:
                self.token = line.decode().rsplit(":", 1)[1].strip()
            if b"serving http" in line:
                break
        for _ in range(100):  # the socket is bound a moment after the line
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", self.port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc: object) -> None:
        import asyncio

        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def client(self, mode: str, token: str | None = None, **kw: Any) -> Client:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token or self.token}"}, timeout=60)
        return Client(streamable_http_client(self.url, http_client=http), mode=mode, **kw)

"""Round trips per second of a ReadOnly call through ``zuno mcp`` over stdio, against a minimal
server of the official SDK doing the same file read, both driven by the SDK's client.

Zuno's call is admitted, recorded durably (intent row + result in SQLite) and bounded by the
output limits; the minimal server only reads. Target: >= 0.8x.

    python bench/mcp_roundtrip.py [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

SRC = Path(__file__).resolve().parents[1] / "src"
MINIMAL = '''
from pathlib import Path
from mcp.server import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("minimal")

@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read(path: str) -> str:
    """Read a file."""
    return Path(path).read_text()

server.run()
'''


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ZUNO")}
    e["PYTHONPATH"] = str(SRC)
    return e


async def rate(params: StdioServerParameters, path: str, n: int, mode: str) -> float:
    async with Client(params, mode=mode) as c:
        for _ in range(20):  # warm up
            await c.call_tool("read", {"path": path})
        t0 = time.perf_counter()
        for _ in range(n):
            r = await c.call_tool("read", {"path": path})
            assert not r.is_error, r.content
        return n / (time.perf_counter() - t0)


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "f.txt").write_text("some file content\n" * 20)
        (root / "minimal.py").write_text(MINIMAL)
        zuno = StdioServerParameters(command=sys.executable, args=["-m", "zuno", "mcp", "--root", d], env=env(), cwd=d)
        minimal = StdioServerParameters(command=sys.executable, args=[str(root / "minimal.py")], env=env(), cwd=d)
        for mode in ("legacy", "2026-07-28"):
            z = await rate(zuno, str(root / "f.txt"), n, mode)
            m = await rate(minimal, str(root / "f.txt"), n, mode)
            print(
                f"{mode}: zuno mcp {z:.0f} calls/s, minimal SDK server {m:.0f} calls/s: {z / m:.2f}x (target >= 0.8x)"
            )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))

"""Overlap through ``zuno mcp``: 8 ParallelSafe calls of 200 ms sent together by one client
(target >= 7x faster than 8 x 200 ms), and 8 Exclusive ones (target: serial, about 1x).

    python bench/mcp_overlap.py
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
EXT = '''
import asyncio, zuno

@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def look200() -> str:
    """Wait 200 ms, read-only."""
    await asyncio.sleep(0.2)
    return "ok"

@zuno.tool()
async def change200() -> str:
    """Wait 200 ms, SideEffecting / Exclusive."""
    await asyncio.sleep(0.2)
    return "ok"
'''


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "ext.py").write_text(EXT)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZUNO")}
        env["PYTHONPATH"] = str(SRC)
        env["ZUNO_CONFIG_CONTENT"] = '{"extensions": ["ext.py"]}'
        params = StdioServerParameters(command=sys.executable, args=["-m", "zuno", "mcp", "--root", d], env=env, cwd=d)
        async with Client(params, mode="legacy") as c:
            await c.call_tool("look200", {})
            for name, target in (("look200", ">= 7x"), ("change200", "about 1x: serial")):
                t0 = time.perf_counter()
                results = await asyncio.gather(*(c.call_tool(name, {}) for _ in range(8)))
                elapsed = time.perf_counter() - t0
                assert all(not r.is_error for r in results)
                print(f"8 x {name}: {elapsed:.2f} s, {8 * 0.2 / elapsed:.1f}x faster than serial (target {target})")


if __name__ == "__main__":
    asyncio.run(main())

"""Round trips per second of a ReadOnly call through ``zuno mcp`` over stdio, against a minimal
server of the official SDK doing the same file read, both driven by the SDK's client.

Zuno's call is admitted, recorded durably (the call's record in SQLite) and bounded by the output
limits; the minimal server only reads. Both servers run at once, each behind its own client of the
same SDK in this process, on the same transport (stdio) and the same protocol mode; rounds of N
calls alternate between the two (the order flips every round), so a load swing of the shared
machine lands on both sides. Printed per side: the best and the median rate, and the CPU time per
call of the server process and of this client process (load-insensitive: where the time goes).
Target: >= 0.8x.

    python bench/mcp_roundtrip.py [N] [--rounds R] [--mode legacy|2026-07-28|both]
    python bench/mcp_roundtrip.py 300 --profile OUT   # cProfile of zuno mcp, written at exit
    python bench/mcp_roundtrip.py 300 --also DIR/src  # one more side: zuno mcp run from another tree
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
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
WARM_UP = 30
TICKS = os.sysconf("SC_CLK_TCK")


def env(src: Path = SRC) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ZUNO")}
    e["PYTHONPATH"] = str(src)
    return e


def children() -> set[int]:
    me = os.getpid()
    found: set[int] = set()
    for task in os.listdir(f"/proc/{me}/task"):
        try:
            found |= {int(p) for p in Path(f"/proc/{me}/task/{task}/children").read_text().split()}
        except OSError:
            pass
    return found


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


class Side:
    def __init__(self, name: str, client: Client, pid: int, path: str) -> None:
        self.name, self.client, self.pid, self.path = name, client, pid, path
        self.rates: list[float] = []
        self.server_cpu: list[float] = []
        self.client_cpu: list[float] = []

    async def round(self, n: int) -> None:
        s0, c0, t0 = cpu_s(self.pid), time.process_time(), time.perf_counter()
        for _ in range(n):
            r = await self.client.call_tool("read", {"path": self.path})
            assert not r.is_error, r.content
        t1, c1, s1 = time.perf_counter(), time.process_time(), cpu_s(self.pid)
        self.rates.append(n / (t1 - t0))
        self.server_cpu.append((s1 - s0) / n * 1000)
        self.client_cpu.append((c1 - c0) / n * 1000)


async def open_side(stack: AsyncExitStack, name: str, params: StdioServerParameters, path: str, mode: str) -> Side:
    before = children()
    client = await stack.enter_async_context(Client(params, mode=mode))
    (pid,) = children() - before
    side = Side(name, client, pid, path)
    for _ in range(WARM_UP):
        await client.call_tool("read", {"path": path})
    return side


async def main(n: int, rounds: int, modes: list[str], profile: str | None, also: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = str(root / "f.txt")
        (root / "f.txt").write_text("some file content\n" * 20)
        (root / "minimal.py").write_text(MINIMAL)
        pre = ["-m", "cProfile", "-o", profile] if profile else []
        zuno = StdioServerParameters(
            command=sys.executable, args=[*pre, "-m", "zuno", "mcp", "--root", d], env=env(), cwd=d
        )
        minimal = StdioServerParameters(command=sys.executable, args=[str(root / "minimal.py")], env=env(), cwd=d)
        for mode in modes:
            async with AsyncExitStack() as stack:
                z = await open_side(stack, "zuno mcp", zuno, path, mode)
                m = await open_side(stack, "minimal SDK server", minimal, path, mode)
                others = []
                for i, src in enumerate(also):
                    other = root / f"also{i}"
                    other.mkdir(exist_ok=True)
                    params = StdioServerParameters(
                        command=sys.executable,
                        args=["-m", "zuno", "mcp", "--root", d, "--db", str(other / "zuno.db")],
                        env=env(Path(src).resolve()),
                        cwd=d,
                    )
                    others.append(await open_side(stack, f"zuno mcp from {src}", params, path, mode))
                sides = [z, m, *others]
                for r in range(rounds):
                    for side in sides if r % 2 == 0 else sides[::-1]:
                        await side.round(n)
            for side in sides:
                print(
                    f"{mode}: {side.name}: best {max(side.rates):.0f} / median {statistics.median(side.rates):.0f}"
                    f" calls/s; CPU per call: server {statistics.median(side.server_cpu):.2f} ms,"
                    f" client {statistics.median(side.client_cpu):.2f} ms (median)"
                )
            per_round = [a / b for a, b in zip(z.rates, m.rates, strict=True)]
            print(
                f"{mode}: zuno / minimal: best {max(z.rates) / max(m.rates):.2f}x,"
                f" median {statistics.median(z.rates) / statistics.median(m.rates):.2f}x,"
                f" median of paired rounds {statistics.median(per_round):.2f}x over {rounds} rounds of {n}"
                " (target >= 0.8x)"
            )
            for other in others:
                paired = [a / b for a, b in zip(other.rates, m.rates, strict=True)]
                print(
                    f"{mode}: {other.name} / minimal: best {max(other.rates) / max(m.rates):.2f}x,"
                    f" median {statistics.median(other.rates) / statistics.median(m.rates):.2f}x,"
                    f" median of paired rounds {statistics.median(paired):.2f}x"
                )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=300, help="calls per round and side")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--mode", default="both", choices=["legacy", "2026-07-28", "both"])
    ap.add_argument("--profile", default=None, help="write a cProfile of the zuno server to this file")
    ap.add_argument("--also", action="append", default=[], help="another tree's src/ to run zuno mcp from")
    a = ap.parse_args()
    modes = ["legacy", "2026-07-28"] if a.mode == "both" else [a.mode]
    asyncio.run(main(a.n, a.rounds, modes, a.profile, a.also))

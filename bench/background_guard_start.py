"""Benchmark: what the guard costs per command — start() to exit of `true` through the process
layer, with the guard fork-server and with a directly started guard, against a raw
`bash -c true` spawn measured in the same run (the physical floor of running a command).

    python bench/background_guard_start.py [--n 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import zuno.process as zp
from zuno.process import CommandSpec, start


async def through_guard(n: int, logs: Path, server: bool) -> list[float]:
    zp.USE_GUARD_SERVER = server
    zp.prestart()
    env = dict(os.environ)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = await start(CommandSpec(["bash", "-c", "true"], logs, env, logs))
        await r.wait()
        await r.wait_group()
        out.append(time.perf_counter() - t)
        await r.close()
        r.log_path.unlink()
    return out


def raw(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], check=True)
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=60)
    n = ap.parse_args().n
    with tempfile.TemporaryDirectory() as d:
        logs = Path(d)
        fork = asyncio.run(through_guard(n, logs, True))
        direct = asyncio.run(through_guard(n, logs, False))
    base = raw(n)
    m = {k: statistics.median(v) * 1000 for k, v in {"fork": fork, "direct": direct, "raw": base}.items()}
    print(f"guard start-to-exit of `bash -c true`, median of {n}:")
    print(f"  raw bash -c true spawn:      {m['raw']:.2f} ms")
    extra = m["fork"] - m["raw"]
    print(f"  guard via fork-server:       {m['fork']:.2f} ms  (+{extra:.2f} ms, {m['fork'] / m['raw']:.1f}x)")
    print(f"  guard started directly:      {m['direct']:.2f} ms  (+{m['direct'] - m['raw']:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

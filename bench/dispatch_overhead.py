"""Dispatcher overhead per durable call, and overlap of ParallelSafe calls.

1. 1000 `read` calls of small files through Session.step in one process (one call per step, the
   worst case: every call pays for its own step), against plain open().read() of the same files.
   Target: <= 0.5 ms of overhead per durable call.
2. A step of 8 ParallelSafe extension calls that each wait 200 ms, against 8 x 200 ms run one after
   another. Target: >= 6x faster.

    python bench/dispatch_overhead.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import zuno

N = 1000
EXT = '''
import asyncio, zuno

@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def wait200(tag: str) -> str:
    """Wait 200 ms."""
    await asyncio.sleep(0.2)
    return tag
'''


async def overhead(root: Path) -> tuple[float, float, float]:
    files = []
    for i in range(N):
        p = root / f"f{i:04d}.txt"
        p.write_text(f"file {i}\n" * 5)
        files.append(p)
    t0 = time.perf_counter()
    for p in files:
        with open(p, "rb") as f:
            f.read()
    plain = time.perf_counter() - t0
    async with zuno.Runtime(root=root) as rt, rt.session() as s:
        await s.step([{"name": "read", "arguments": {"path": files[0].name}}])  # warm up
        t0 = time.perf_counter()
        for p in files:
            res = await s.step([{"name": "read", "arguments": {"path": p.name}}])
            assert res.results[0].outcome == "ok"
        one_per_step = time.perf_counter() - t0
        t0 = time.perf_counter()
        for start in range(0, N, 100):
            batch = [{"name": "read", "arguments": {"path": p.name}} for p in files[start : start + 100]]
            res = await s.step(batch)
            assert all(r.outcome == "ok" for r in res.results)
        hundred_per_step = time.perf_counter() - t0
    return plain, one_per_step, hundred_per_step


async def overlap(root: Path) -> float:
    (root / "wait_ext.py").write_text(EXT)
    async with zuno.Runtime(root=root, config_overrides={"extensions": ["wait_ext.py"]}) as rt, rt.session() as s:
        t0 = time.perf_counter()
        res = await s.step([{"name": "wait200", "arguments": {"tag": str(i)}} for i in range(8)])
        elapsed = time.perf_counter() - t0
        assert all(r.outcome == "ok" for r in res.results)
    return elapsed


def main() -> None:
    runs = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            runs.append(asyncio.run(overhead(Path(d))))
    plain, one, hundred = (statistics.median(r[i] for r in runs) for i in range(3))
    per_call_one = (one - plain) / N * 1000
    per_call_hundred = (hundred - plain) / N * 1000
    print(f"plain open().read(): {plain / N * 1e6:.1f} us per file")
    print(
        f"read through Session.step, 1 call per step:   {one / N * 1000:.3f} ms per call; "
        f"overhead {per_call_one:.3f} ms per durable call (target <= 0.5 ms): "
        f"{'PASS' if per_call_one <= 0.5 else 'MISS'}; {one / plain:.0f}x plain"
    )
    print(
        f"read through Session.step, 100 calls per step: {hundred / N * 1000:.3f} ms per call; "
        f"overhead {per_call_hundred:.3f} ms per durable call (target <= 0.5 ms): "
        f"{'PASS' if per_call_hundred <= 0.5 else 'MISS'}"
    )
    with tempfile.TemporaryDirectory() as d:
        elapsed = min(asyncio.run(overlap(Path(d))) for _ in range(3))
    speedup = 1.6 / elapsed
    print(
        f"8 ParallelSafe calls x 200 ms: {elapsed * 1000:.0f} ms, {speedup:.2f}x faster than serial 1600 ms "
        f"(target >= 6x): {'PASS' if speedup >= 6 else 'MISS'}"
    )


if __name__ == "__main__":
    main()

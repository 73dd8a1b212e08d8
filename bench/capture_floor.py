"""Capture against its physical floor: how close Zuno's capture comes to the least work that keeps
every byte of a command's output in a file.

    python bench/capture_floor.py [--rounds N] [--gib G]

Each round runs, in a shuffled (seeded) order, in ONE process:

* peer   — ``head -c N /dev/zero | cat > /dev/null`` (the shell benchmark's peer: keeps nothing);
* floor  — the same producer's pipe read by the best plain loop found here (1 MiB batches of
           non-blocking reads, one ``write`` each) into a fresh file: the least work a capture that
           keeps every byte can do, with nothing of Zuno around it;
* layer  — Zuno's process layer (``zuno.process.start``: guard, ring tail, log file), start to exit;
* shell  — a whole ``shell`` call through the runtime (durationMs of its receipt).

It prints the best and the median of each, and the ratios capture/peer and capture/floor. On the
shared 2-core VM this was written on, fresh memory costs between 0.2 and 2 s per GiB depending on
what the hypervisor still has mapped in, so every figure swings; the floor swings with it, which is
why it is measured in the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import random
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

import zuno  # noqa: E402
from zuno import limits  # noqa: E402
from zuno.process import CommandSpec, start  # noqa: E402

_F_SETPIPE_SZ = 1031


def peer(n: int) -> float:
    t = time.perf_counter()
    subprocess.run(["bash", "-c", f"head -c {n} /dev/zero | cat > /dev/null"], check=True)
    return time.perf_counter() - t


def timed_copy(n: int, d: Path, copy: Callable[[int, int], None]) -> float:
    """Time ``copy(pipe_fd, file_fd)`` moving the producer's n bytes into a fresh file."""
    out = os.open(d / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    t = time.perf_counter()
    p = subprocess.Popen(["head", "-c", str(n), "/dev/zero"], stdout=subprocess.PIPE)
    assert p.stdout is not None
    fcntl.fcntl(p.stdout.fileno(), _F_SETPIPE_SZ, limits.PROCESS_PIPE_SIZE)
    copy(p.stdout.fileno(), out)
    p.wait()
    took = time.perf_counter() - t
    assert os.fstat(out).st_size == n
    os.close(out)
    os.unlink(d / "floor.bin")
    return took


def batched(batch: int = limits.PROCESS_READ_CHUNK, *, aligned: bool = False) -> Callable[[int, int], None]:
    """The best plain loop found for pipe -> file here: fill one 1 MiB buffer with non-blocking reads
    until the pipe is empty, then write it with one call. ``--variants`` runs it with other batch
    sizes and with batches ending on ``batch``-aligned file offsets, next to ``spliced``."""

    def copy(fd: int, out: int) -> None:
        os.set_blocking(fd, False)
        view = memoryview(bytearray(batch))
        total = 0
        done = False
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not done:
                sel.select()
                while not done:
                    want = batch - total % batch if aligned else batch
                    got = 0
                    while got < want:
                        try:
                            k = os.readv(fd, [view[got:want]])
                        except BlockingIOError:
                            break
                        if not k:
                            done = True
                            break
                        got += k
                    left = view[:got]
                    while left:
                        left = left[os.write(out, left) :]
                    total += got
                    if got < want:
                        break

    return copy


def spliced(fd: int, out: int) -> None:
    """splice(2) from the pipe into the file: no copy through user memory."""
    while os.splice(fd, out, limits.PROCESS_READ_CHUNK):
        pass


async def layer(n: int, d: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ZUNO_")}
    t = time.perf_counter()
    r = await start(CommandSpec(["head", "-c", str(n), "/dev/zero"], d, env, d / "logs"))
    await r.wait()
    took = time.perf_counter() - t
    assert r.total_written == n
    await r.close()
    for f in (d / "logs").iterdir():
        f.unlink()
    return took


async def shell(n: int, d: Path) -> float:
    root = Path(tempfile.mkdtemp(dir=d))
    async with zuno.Runtime(root=root) as rt, rt.session() as s:
        res = await s.step([{"name": "shell", "arguments": {"command": f"head -c {n} /dev/zero"}}])
    rec = res.results[0]
    assert rec.metadata["totalWritten"] == n, rec.text
    shutil.rmtree(root)
    return float(rec.metadata["durationMs"]) / 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument(
        "--variants", action="store_true", help="also run the floor loop's alternatives (batch sizes, aligned, splice)"
    )
    a = ap.parse_args()
    n = int(a.gib * (1 << 30))
    rng = random.Random(a.seed)
    got: dict[str, list[float]] = {"peer": [], "floor": [], "layer": [], "shell": []}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        d = Path(tmp)
        runners: dict[str, Callable[[], float]] = {
            "peer": lambda: peer(n),
            "floor": lambda: timed_copy(n, d, batched()),
            "layer": lambda: asyncio.run(layer(n, d)),
            "shell": lambda: asyncio.run(shell(n, d)),
        }
        if a.variants:
            kib = 1 << 10
            for size in (64 * kib, 256 * kib, 512 * kib):
                runners[f"{size // kib}K"] = lambda size=size: timed_copy(n, d, batched(size))
            runners["aligned"] = lambda: timed_copy(n, d, batched(aligned=True))
            runners["splice"] = lambda: timed_copy(n, d, spliced)
            got.update({k: [] for k in runners if k not in got})
        for _ in range(a.rounds):
            order = list(runners)
            rng.shuffle(order)
            for name in order:
                got[name].append(runners[name]())
    mib = 1 << 20
    print(f"{a.gib:g} GiB, {a.rounds} rounds (seconds: best / median; throughput from the best)")
    for name, times in got.items():
        print(
            f"  {name:7s} {min(times):.2f} / {statistics.median(times):.2f} s  {n / min(times) / mib:6.0f} MiB/s   "
            f"all: {' '.join(f'{x:.2f}' for x in times)}"
        )
    for name in ("layer", "shell"):
        best_peer = min(got["peer"]) / min(got[name])
        med_peer = statistics.median(got["peer"]) / statistics.median(got[name])
        best_floor = min(got["floor"]) / min(got[name])
        med_floor = statistics.median(got["floor"]) / statistics.median(got[name])
        print(
            f"{name}: vs `cat > /dev/null` {best_peer:.2f}x best, {med_peer:.2f}x median (target >= 0.5x); "
            f"vs the floor {best_floor:.2f}x best, {med_floor:.2f}x median"
        )
    print(
        f"the floor itself: {min(got['peer']) / min(got['floor']):.2f}x of `cat > /dev/null` best, "
        f"{statistics.median(got['peer']) / statistics.median(got['floor']):.2f}x median"
    )


if __name__ == "__main__":
    main()

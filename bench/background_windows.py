"""Benchmark: a background command writes 1 GiB while a reader pages through it with windows.

Targets (issue 5): peak memory of the Zuno process < 100 MiB, and every byte accounted for — the
SHA-256 of all windows, concatenated, equals the SHA-256 of the log file.

The reader uses the same window code ``bg output`` uses (``RunningCommand.window`` with a cursor,
51200-byte windows), while the command is still running: windows inside the 2 MiB tail come
from memory, older ones from the log file (``fromDisk``). The command runs as a background job
of a real session (JobManager.start), so the job's watcher, capture and completion are live too.

The peer, measured in the same run: the same generator piped to ``cat > /dev/null``.

    python bench/background_windows.py              # 1 GiB
    python bench/background_windows.py --mib 64     # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from zuno import Runtime, limits
from zuno.jobs import JobManager
from zuno.process import CommandSpec


def generator(size: int) -> str:
    # Varied text (not one repeated byte), produced fast: yes(1) is a pipe writer at memory speed.
    return f"yes 'The quick brown fox jumps over the lazy dog 0123456789 {{window}} [bench]' | head -c {size}"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run(size: int, root: Path) -> dict[str, float | int | bool | str]:
    async with Runtime(root=root) as rt, rt.session() as s:
        jm = JobManager.for_session(s)
        spec = CommandSpec(["bash", "-c", generator(size)], root, dict(os.environ), jm.log_dir, label="bench")
        t0 = time.perf_counter()
        job = await jm.start(spec, label="bench 1 GiB", command="bench")
        rc = job.running
        h = hashlib.sha256()
        cursor = 0
        windows = disk = 0
        while True:
            w, from_disk = rc.window(cursor, limits.WINDOW_MAX_LIMIT, from_end=True)
            if w.data:
                h.update(w.data)
                windows += 1
                disk += from_disk
                cursor = w.cursor
                continue
            if rc.exit is not None and rc.capture_done and cursor >= rc.total_written:
                break
            await rc.wait_output(cursor, 1.0)
        elapsed = time.perf_counter() - t0
        await asyncio.wait_for(job.finished.wait(), 60)
        file_sha = hashlib.sha256()
        with open(rc.log_path, "rb") as f:
            while chunk := f.read(1 << 20):
                file_sha.update(chunk)
        ok = h.hexdigest() == file_sha.hexdigest() and cursor == size == rc.log_path.stat().st_size
        rc.log_path.unlink()
        return {
            "bytes": cursor,
            "seconds": elapsed,
            "windows": windows,
            "fromDisk": disk,
            "sha_equal": ok,
            "sha256": h.hexdigest(),
            "status": job.status,
        }


def peer(size: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", generator(size) + " | cat > /dev/null"], check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    a = ap.parse_args()
    size = a.mib * 1024 * 1024
    base = peak_rss_mib()
    with tempfile.TemporaryDirectory() as d:
        res = asyncio.run(run(size, Path(d)))
    peak = peak_rss_mib()
    p = peer(size)
    mib_s = size / (1 << 20) / float(res["seconds"])
    print(f"background_windows: {size} bytes written by a background job, read back in {res['windows']} windows")
    share = 100 * int(res["fromDisk"]) / max(1, int(res["windows"]))
    print(f"  windows served from disk: {res['fromDisk']} ({share:.1f}%)")
    print(f"  SHA-256 of all windows == SHA-256 of the log: {res['sha_equal']} ({res['sha256'][:16]}…)")
    print(f"  peak RSS of the Zuno process: {peak:.1f} MiB (before the run {base:.1f} MiB; target < 100 MiB)")
    print(
        f"  write+page-through: {float(res['seconds']):.2f} s = {mib_s:.0f} MiB/s; "
        f"peer generator | cat > /dev/null: {p:.2f} s; ratio {p / float(res['seconds']):.2f}x of the peer"
    )
    print(f"  job status: {res['status']}")
    return 0 if res["sha_equal"] and peak < 100 else 1


if __name__ == "__main__":
    sys.exit(main())

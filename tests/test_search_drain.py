"""How rg's stdout is read: small writes are batched by pausing the reader, the writer's exit ends
a pause at once, and a fast writer is read without pausing. A real child process writes, through
the same pipe, pidfd and event loop as a search."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

import zuno.tools.search.rg as rgmod
from zuno.tools.search.rg import Rg, run_rg

WRITER = """
import os, sys, time
pieces, size, gap = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
for i in range(pieces):
    os.write(1, (b"%06d" % i) + b"x" * (size - 7) + b"\\n")
    if gap:
        time.sleep(gap)
"""


def _writer(tmp_path: Path) -> Rg:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    exe = tmp_path / "writer"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    exe.chmod(0o755)
    return Rg(str(exe), (15, 0, 0), "test")


async def _run(rg: Rg, tmp_path: Path, *argv: str) -> tuple[bytes, int]:
    got: list[bytes] = []
    res = await run_rg(rg, list(argv), str(tmp_path), got.append)
    assert res.returncode == 0
    return b"".join(got), len(got)


async def test_small_writes_are_read_in_fewer_larger_chunks(tmp_path: Path) -> None:
    rg = _writer(tmp_path)
    data, feeds = await _run(rg, tmp_path, "300", "100", "0.0005")
    assert data == b"".join((b"%06d" % i) + b"x" * 93 + b"\n" for i in range(300))
    # 300 writes over >= 150 ms; without the pause nearly every write was a wake and a feed
    assert feeds < 150, feeds


async def test_the_writers_exit_ends_a_pause_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rgmod, "_PAUSE_S", 60.0)  # a pause that would outlast the test
    rg = _writer(tmp_path)
    t0 = time.monotonic()
    data, feeds = await asyncio.wait_for(_run(rg, tmp_path, "3", "50", "0.05"), 30)
    assert time.monotonic() - t0 < 30
    assert data.count(b"\n") == 3 and feeds >= 1


async def test_a_fast_writer_is_read_to_its_end(tmp_path: Path) -> None:
    rg = _writer(tmp_path)
    data, _ = await _run(rg, tmp_path, "20000", "400", "0")  # 8 MB, many times the pipe
    assert len(data) == 20000 * 400 and data.count(b"\n") == 20000
    assert data.startswith(b"000000x") and data.endswith(b"019999" + b"x" * 393 + b"\n")


async def test_output_written_in_blocks_is_read_as_it_comes(tmp_path: Path) -> None:
    rg = _writer(tmp_path)
    data, feeds = await _run(rg, tmp_path, "100", "8192", "0.0005")  # like glob's paths: 8 KiB blocks, often
    assert len(data) == 100 * 8192
    assert feeds > 30, feeds  # no pause: about one read per block (pausing would make it ~13: 50 ms / 4 ms)

"""How rg's stdout is read: small writes and blocks written often are batched by pausing the
reader, rare blocks are read as they come, the writer's exit ends a pause at once, and a fast
writer is read without pausing, in bounded reads. A real child process writes, through
the same pipe, pidfd and event loop as a search."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import zuno.tools.search.rg as rgmod
from zuno.tools.search.rg import run_rg
from zuno.tools.search.rg_discovery import Rg

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
    data, feeds = await asyncio.wait_for(_run(rg, tmp_path, "3", "50", "0.05"), 30)  # a hang guard only
    assert data.count(b"\n") == 3 and feeds >= 1


async def test_a_fast_writer_is_read_to_its_end(tmp_path: Path) -> None:
    rg = _writer(tmp_path)
    got: list[bytes] = []
    res = await run_rg(rg, ["20000", "400", "0"], str(tmp_path), got.append)  # 8 MB, many times the pipe
    data = b"".join(got)
    assert res.returncode == 0 and res.stdout_bytes == len(data)
    assert len(data) == 20000 * 400 and data.count(b"\n") == 20000
    assert data.startswith(b"000000x") and data.endswith(b"019999" + b"x" * 393 + b"\n")
    assert max(map(len, got)) <= rgmod._READ_BYTES  # each read bounded, whatever the pipe holds


def _count_pauses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    pauses = [0]
    real = rgmod._Drain._pause

    def pause(self: rgmod._Drain, seconds: float) -> None:
        pauses[0] += 1
        real(self, seconds)

    monkeypatch.setattr(rgmod._Drain, "_pause", pause)
    return pauses


def _blocks(n: int) -> bytes:
    return b"".join((b"%06d" % i) + b"x" * 8185 + b"\n" for i in range(n))


async def test_blocks_written_often_are_taken_in_pauses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = _count_pauses(monkeypatch)
    monkeypatch.setattr(rgmod, "_BLOCK_PAUSE_MIN_S", 0.0)  # whatever rate this machine's load leaves the writer
    monkeypatch.setattr(rgmod, "_BLOCK_PAUSE_MAX_S", 1.0)
    rg = _writer(tmp_path)
    data, feeds = await _run(rg, tmp_path, "200", "8192", "0.0002")  # like glob's paths: 8 KiB blocks, often
    assert data == _blocks(200)
    # without the pause, a wake and a read per block (~200); with it, what piled up in each 4 ms
    assert pauses[0] > 0
    assert feeds < 100, feeds


async def test_blocks_too_few_for_a_pause_are_read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = _count_pauses(monkeypatch)
    monkeypatch.setattr(rgmod, "_BLOCK_GATHER_BYTES", 1 << 30)  # no rate gathers that much in 8 ms
    rg = _writer(tmp_path)
    data, _ = await _run(rg, tmp_path, "100", "8192", "0.0002")
    assert data == _blocks(100)
    assert pauses[0] == 0


async def test_blocks_written_rarely_are_read_as_they_come(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = _count_pauses(monkeypatch)
    rg = _writer(tmp_path)
    data, feeds = await _run(rg, tmp_path, "8", "8192", "0.02")  # a block every 20 ms: a pause would add a wake
    assert data == _blocks(8)
    assert pauses[0] == 0 and feeds >= 8


async def test_the_writers_exit_ends_a_pause_between_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = _count_pauses(monkeypatch)
    monkeypatch.setattr(rgmod, "_BLOCK_GATHER_BYTES", 1 << 40)  # a pause that would outlast the test
    monkeypatch.setattr(rgmod, "_BLOCK_PAUSE_MIN_S", 0.0)
    monkeypatch.setattr(rgmod, "_BLOCK_PAUSE_MAX_S", float("inf"))
    rg = _writer(tmp_path)
    data, _ = await asyncio.wait_for(_run(rg, tmp_path, "20", "8192", "0.0002"), 30)  # a hang guard only
    assert data == _blocks(20) and pauses[0] >= 1


async def test_a_pause_never_leaves_data_in_the_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read that fills its buffer may have left more in the pipe: no pause then, or a writer
    faster than one read per pause would be throttled to it (and block on a full pipe). Every
    pause must follow a read that found the pipe empty (short, or nothing to read)."""
    monkeypatch.setattr(rgmod, "_READ_BYTES", 4096)  # smaller than each write: most reads fill it
    monkeypatch.setattr(rgmod, "_BLOCK_PAUSE_MIN_S", 0.0)  # pause for blocks whatever the writer's rate
    monkeypatch.setattr(rgmod, "_BLOCK_PAUSE_MAX_S", 1.0)
    real_read = rgmod.os.read
    last = {"emptied": True}
    left_data: list[bool] = []

    def read(fd: int, n: int) -> bytes:
        try:
            got = real_read(fd, n)
        except BlockingIOError:
            last["emptied"] = True
            raise
        last["emptied"] = len(got) < n
        return got

    real_pause = rgmod._Drain._pause

    def pause(self: rgmod._Drain, seconds: float) -> None:
        left_data.append(not last["emptied"])
        real_pause(self, seconds)

    monkeypatch.setattr(rgmod.os, "read", read)
    monkeypatch.setattr(rgmod._Drain, "_pause", pause)
    rg = _writer(tmp_path)
    data, _ = await asyncio.wait_for(_run(rg, tmp_path, "800", "8192", "0.0002"), 60)  # a hang guard only
    assert data == _blocks(800)
    assert left_data, "the writer's blocks should have been taken in pauses"
    assert not any(left_data), f"{sum(left_data)} of {len(left_data)} pauses left data in the pipe"

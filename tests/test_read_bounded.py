"""Issue 10, item 3 (and item 12's file-tool messages): read never blocks the event loop and never
holds more than its window. A FIFO, a character device and a socket are refused by the opened
descriptor's type; a 2 GiB sparse file read with limit 1 streams (bounded memory) while a
concurrent call of the same step completes first. Each scenario runs in a subprocess with a
timeout, so a regression fails instead of hanging the suite, and memory is measured there as a
ru_maxrss delta."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits

from conftest import zuno_env

SCRIPT = r"""
import asyncio, json, resource, sys
import zuno

async def main():
    root, profile, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    async with zuno.Runtime(root=root, profile=profile) as rt, rt.session() as s:
        await s.step([{"name": "read", "arguments": {"path": "small.txt"}}])  # warm every import
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        steps = calls if calls and isinstance(calls[0], list) else [calls]
        for one in steps:  # the results of the last step are printed
            res = await s.step(one)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"results": [r.to_json() for r in res.results], "rss_delta_kib": after - before}))

asyncio.run(main())
"""


def run_step(root: Path, calls: list[Any], profile: str = "chord") -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), profile, json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=180,  # a read that blocks the loop would hang here: the test fails, it does not hang
        env=zuno_env(),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "small.txt").write_text("one\ntwo\n")
    return workspace


def test_a_fifo_is_refused_by_every_file_tool_without_waiting(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    out = run_step(
        ws,
        [
            call("read", path="pipe"),
            call("read", path="small.txt"),
            call("view_image", path="pipe"),
        ],
    )
    fifo, small, image = out["results"]
    assert fifo["outcome"] == "error" and "pipe is a FIFO (named pipe), not a regular file" in fifo["text"]
    assert small["outcome"] == "ok" and "two" in small["text"]
    assert image["outcome"] == "error" and "FIFO" in image["text"]
    for tool, args in (
        ("write", {"path": "pipe", "content": "x"}),
        ("edit", {"path": "pipe", "old_string": "a", "new_string": "b"}),
        ("delete", {"path": "pipe"}),
    ):
        (rec,) = run_step(ws, [call(tool, **args)])["results"]
        assert rec["outcome"] == "error" and "is a FIFO (named pipe), not a regular file" in rec["text"], rec
    assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)  # untouched, not replaced


def test_read_artifact_refuses_a_fifo(ws: Path) -> None:
    script = r"""
import asyncio, json, os, sys
import zuno

async def main():
    async with zuno.Runtime(root=sys.argv[1], profile="chord") as rt, rt.session() as s:
        await s.step([{"name": "save_artifact", "arguments": {"filename": "a.txt", "content": "x"}}])
        d = os.path.join(sys.argv[1], ".zuno", "artifacts", s.id)
        os.mkfifo(os.path.join(d, "planted"))
        res = await s.step([{"name": "read_artifact", "arguments": {"path": "planted"}}])
    print(json.dumps(res.results[0].to_json()))

asyncio.run(main())
"""
    proc = subprocess.run(
        [sys.executable, "-c", script, str(ws)], capture_output=True, text=True, timeout=120, env=zuno_env()
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["outcome"] == "error" and "FIFO" in rec["text"], rec


def test_a_character_device_and_a_socket_are_refused(ws: Path) -> None:
    try:
        os.mknod(ws / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    try:
        out = run_step(
            ws,
            [
                call("read", path="zero", limit=1),
                call("read", path="sock"),
                call("write", path="zero", content="x"),
                call("read", path="small.txt"),
            ],
        )
    finally:
        sock.close()
    dev, sck, write, small = out["results"]
    assert dev["outcome"] == "error" and "is a character device, not a regular file" in dev["text"]
    assert sck["outcome"] == "error" and "is a socket, not a regular file" in sck["text"]
    assert write["outcome"] == "error" and "character device" in write["text"]
    assert small["outcome"] == "ok"
    assert out["rss_delta_kib"] < 64 * 1024, out["rss_delta_kib"]


def test_a_2gib_sparse_file_streams_in_bounded_memory_and_the_loop_stays_responsive(ws: Path) -> None:
    big = ws / "big.txt"
    header = b"".join(b"line %05d\n" % i for i in range(1, 820))  # 8190 bytes of text, then a hole
    size = 2 * 1024**3
    with open(big, "wb") as f:
        f.write(header)
        f.truncate(size)
    out = run_step(ws, [call("read", path="big.txt", limit=1), call("read", path="small.txt")])
    page, small = out["results"]
    assert page["outcome"] == "ok", page["text"]
    assert page["text"].splitlines()[0] == "1\tline 00001"
    assert page["metadata"]["bytes"] == size and page["metadata"]["lines"] == 820  # 819 lines and the hole
    assert "continue with offset=2" in page["text"]
    # The concurrent call of the same step finished while the big file was still being streamed.
    assert small["outcome"] == "ok" and small["ended_at"] < page["ended_at"]
    # Memory: a window, not the file (2 GiB before the fix).
    assert out["rss_delta_kib"] < 64 * 1024, out["rss_delta_kib"]
    # The read receipt's digest is of every byte, made while streaming.
    h = hashlib.sha256(header)
    zeros = bytes(1 << 20)
    left = size - len(header)
    while left:
        n = min(left, len(zeros))
        h.update(zeros[:n])
        left -= n
    assert page["metadata"]["sha256"] == h.hexdigest()


def test_replacing_and_deleting_a_large_file_never_holds_it(ws: Path) -> None:
    for name in ("huge.bin", "gone.bin"):
        with open(ws / name, "wb") as f:
            f.truncate(512 * 1024**2)
    out = run_step(
        ws,
        [
            [call("read", path="huge.bin"), call("read", path="gone.bin")],
            [call("write", path="huge.bin", content="small now\n"), call("delete", path="gone.bin")],
        ],
    )
    write, delete = out["results"]
    assert write["outcome"] == "ok" and delete["outcome"] == "ok", (write["text"], delete["text"])
    assert (ws / "huge.bin").read_bytes() == b"small now\n" and not (ws / "gone.bin").exists()
    assert delete["metadata"]["bytes"] == 512 * 1024**2
    assert out["rss_delta_kib"] < 64 * 1024, out["rss_delta_kib"]


async def test_a_line_longer_than_read_holds_is_shown_cut_and_says_so(workspace: Path) -> None:
    long = b"x" * (limits.READ_LINE_HOLD_BYTES + 4096)
    (workspace / "wide.txt").write_bytes(b"first\n" + long + b"\nlast\n")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step([call("read", path="wide.txt", offset=2, limit=1)])
    rec = res.results[0]
    assert str(rec.outcome) == "ok"
    meta = rec.metadata
    assert meta["lines"] == 3 and meta["sha256"] == hashlib.sha256((workspace / "wide.txt").read_bytes()).hexdigest()
    # A row over the output limit is cut to what the page holds (never withheld whole), with the note.
    assert "withheldOutput" not in meta
    held = len(rec.text.split("\t", 1)[1].split(" [...", 1)[0])
    assert rec.text.startswith("2\txxxx") and len(rec.text.encode()) <= 51200
    assert f"line 2 is {len(long)} bytes; read holds its first {held}." in rec.text


async def test_paging_matches_the_whole_file_across_chunk_boundaries(workspace: Path) -> None:
    lines = [f"{i}:" + "y" * (i % 97) for i in range(1, 60_001)]
    data = ("\r\n".join(lines)).encode()  # no final newline, CRLF, well over one 1 MiB chunk
    (workspace / "m.txt").write_bytes(data)
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        for offset in (1, 13_000, 59_990):
            res = await s.step([call("read", path="m.txt", offset=offset, limit=20)])
            rec = res.results[0]
            got = [row.split("\t", 1)[1] for row in rec.text.splitlines() if "\t" in row]
            assert got == lines[offset - 1 : offset - 1 + 20][: len(got)] and got, rec.text[:200]
            assert rec.metadata["lines"] == 60_000 and rec.metadata["bytes"] == len(data)


async def test_an_image_names_view_image_where_it_is_on_the_surface(workspace: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    (workspace / "pic.png").write_bytes(png)
    for profile, expected in (("chord", 'view_image {"path": "pic.png"}'), ("zuno", "no image viewer")):
        async with zuno.Runtime(root=workspace, profile=profile) as rt, rt.session() as s:
            res = await s.step([call("read", path="pic.png")])
        rec = res.results[0]
        assert str(rec.outcome) == "error" and "is an image (PNG" in rec.text and expected in rec.text, rec.text
    cfg = {"tools": {"view_image": False}}
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg) as rt, rt.session() as s:
        res = await s.step([call("read", path="pic.png")])
    assert "no image viewer" in res.results[0].text


async def test_a_directory_where_a_file_is_expected_says_is_a_directory(workspace: Path) -> None:
    (workspace / "pkg").mkdir()
    cfg = {"tools": {"apply_patch": True}}
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg) as rt, rt.session() as s:
        res = await s.step(
            [
                call("write", path="pkg", content="x"),
                call("edit", path="pkg", old_string="a", new_string="b"),
                call("apply_patch", patch="*** Begin Patch\n*** Update File: pkg\n@@\n-a\n+b\n*** End Patch"),
                call("apply_patch", patch="*** Begin Patch\n*** Add File: pkg\n+b\n*** End Patch"),
                call("delete", path="pkg"),
            ]
        )
    for rec in res.results:
        assert str(rec.outcome) == "error" and "pkg is a directory" in rec.text, rec.text
        assert "does not exist" not in rec.text and "no such file" not in rec.text
    assert (workspace / "pkg").is_dir()
    # A trailing '/' names a directory: no file "newdir" is created in its place.
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg) as rt, rt.session() as s:
        res = await s.step(
            [
                call("write", path="newdir/", content="x"),
                call("edit", path="pkg/", old_string="a", new_string="b"),
                call("apply_patch", patch="*** Begin Patch\n*** Add File: newdir/\n+b\n*** End Patch"),
            ]
        )
    for rec, field in zip(res.results, ("path", "path", "patch"), strict=True):
        assert (str(rec.outcome), str(rec.block_kind)) == ("blocked", "invalid_arguments"), rec.text
        assert f"argument '{field}'" in rec.text and "names a directory" in rec.text
    assert not (workspace / "newdir").exists()


async def test_view_image_reads_a_bounded_source(workspace: Path) -> None:
    with open(workspace / "huge.png", "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.truncate(limits.IMAGE_MAX_SOURCE_BYTES + 1)
    (workspace / "dir.png").mkdir()
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        res = await s.step([call("view_image", path="huge.png"), call("view_image", path="dir.png")])
    big, d = res.results
    assert (str(big.outcome), str(big.block_kind)) == ("blocked", "invalid_arguments"), big.text
    assert f"larger than {limits.IMAGE_MAX_SOURCE_BYTES} bytes" in big.text
    assert str(d.outcome) == "error" and "dir.png is a directory" in d.text


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


async def test_cancelling_a_long_read_stops_the_streaming_scan(workspace: Path) -> None:
    """Ctrl-C reaches a read: the call settles cancelled and the worker thread stops reading at
    its next chunk (observed in this process's own read counter, /proc/self/io)."""
    import asyncio
    import time

    size = 8 * 1024**3
    with open(workspace / "endless.txt", "wb") as f:
        f.write(b"text\n")
        f.truncate(size)
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        base = _rchar()
        step = asyncio.create_task(s.step([call("read", path="endless.txt")]))
        deadline = time.monotonic() + 60
        while _rchar() - base < 64 * 1024**2:  # the scan is under way
            assert time.monotonic() < deadline, "the scan never started"
            await asyncio.sleep(0.01)
        s.cancel()
        res = await asyncio.wait_for(step, 60)
        rec = res.results[0]
        assert rec.cancelled is True, rec.text
        await asyncio.sleep(0.3)  # the thread sees the stop at its next chunk
        settled = _rchar()
        await asyncio.sleep(0.5)
        assert _rchar() - settled < 4 * limits.FILE_READ_CHUNK, "the scan kept reading after the cancel"
        assert settled - base < size, "the whole file was read despite the cancel"


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_the_streamed_window_equals_the_whole_file_split(tmp_path: Path, monkeypatch: Any, chunk: int) -> None:
    """scan_window against the obvious reading of the whole file, with chunk boundaries anywhere."""
    import random
    import threading

    from zuno.tools import file_scan

    monkeypatch.setattr(limits, "FILE_READ_CHUNK", chunk)
    rng = random.Random(chunk)
    stop = threading.Event()
    for case in range(40):
        lines = ["".join(rng.choice("ab\r") for _ in range(rng.randrange(0, 6))) for _ in range(rng.randrange(0, 30))]
        data = "\n".join(lines).encode() + (b"\n" if rng.random() < 0.5 else b"")
        p = tmp_path / f"c{case}"
        p.write_bytes(data)
        whole = data.split(b"\n")
        if data.endswith(b"\n"):
            whole.pop()
        total = len(whole) if data else 0
        start, want = rng.randrange(1, 35), rng.randrange(1, 8)
        fd = os.open(p, os.O_RDONLY)
        try:
            scan = file_scan.scan_window(fd, start, want, 10_000, stop)
        finally:
            os.close(fd)
        assert (scan.size, scan.lines, scan.sha256) == (len(data), total, hashlib.sha256(data).hexdigest())
        # A CRLF's own CR is not shown; a CR of the line's text before it is (b"x\r\r\n" is "x\r"),
        # and so is one that ends a last line without a line break (no CRLF there).
        broken = [w.decode().removesuffix("\r") for w in whole[:-1]]
        last = [w.decode() if not data.endswith(b"\n") else w.decode().removesuffix("\r") for w in whole[-1:]]
        expected = (broken + last)[start - 1 : start - 1 + want]
        assert [r.text for r in scan.rows] == expected, (data, start, want)
        assert [r.number for r in scan.rows] == list(range(start, start + len(expected)))

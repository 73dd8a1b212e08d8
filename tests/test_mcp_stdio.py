"""``zuno mcp`` over stdio at the byte level: a raw client on the process's pipes.

The server writes the wire through its own pipe writer on the event loop; these tests hold what
the SDK's writer held: fd 0 and fd 1 are diverted while serving (nothing a call runs reaches the
wire), a response far bigger than the pipe's buffer arrives whole to a client that reads late, and
the responses written before the client closes stdin reach it before the process exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from conftest import zuno_env

LEGACY = "2025-11-25"


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _init(rid: int = 0) -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        }
    ) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _call(rid: int, name: str, arguments: dict[str, Any]) -> bytes:
    return _line(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    )


async def _start(root: Path, config: dict[str, Any] | None = None) -> asyncio.subprocess.Process:
    env = zuno_env({"ZUNO_CONFIG_CONTENT": json.dumps(config)} if config else None)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "mcp", "--root", str(root),
        env=env, cwd=str(root), limit=64 << 20,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


_SEEN: dict[tuple[int, int], dict[str, Any]] = {}


async def _response(proc: asyncio.subprocess.Process, rid: int) -> dict[str, Any]:
    """The response with this id (responses to requests in flight together come in any order)."""
    assert proc.stdout is not None
    while (proc.pid, rid) not in _SEEN:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, "the server closed stdout before answering"
        msg = json.loads(line)
        if "id" in msg:
            _SEEN[(proc.pid, msg["id"])] = msg
    return _SEEN.pop((proc.pid, rid))


async def test_fd_0_and_1_are_not_the_wire_while_serving(workspace: Path) -> None:
    (workspace / "f.txt").write_text("hello\n")
    proc = await _start(workspace)
    assert proc.stdin is not None
    try:
        proc.stdin.write(_init() + _call(1, "read", {"path": "f.txt"}))
        await proc.stdin.drain()
        await _response(proc, 0)
        first = await _response(proc, 1)
        assert first["result"]["structuredContent"]["outcome"] == "ok"
        fds = Path(f"/proc/{proc.pid}/fd")
        assert os.readlink(fds / "0") == os.devnull
        assert os.readlink(fds / "1") == os.readlink(fds / "2")  # stray output goes to stderr
        # ...and the wire still answers.
        proc.stdin.write(_call(2, "read", {"path": "f.txt"}))
        await proc.stdin.drain()
        assert "hello" in (await _response(proc, 2))["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0


async def test_a_response_bigger_than_the_pipe_arrives_whole_to_a_late_reader(workspace: Path) -> None:
    lines = [f"line {i:06d} " + "x" * 90 for i in range(6000)]  # ~600 KB: ten times a pipe's buffer
    (workspace / "big.txt").write_text("\n".join(lines) + "\n")
    proc = await _start(workspace, {"tool_output": {"max_bytes": 4 << 20, "max_lines": 10_000}})
    assert proc.stdin is not None
    try:
        proc.stdin.write(_init())
        await proc.stdin.drain()
        await _response(proc, 0)
        proc.stdin.write(_call(1, "read", {"path": "big.txt", "limit": 6000}) + _call(2, "read", {"path": "big.txt"}))
        await proc.stdin.drain()
        await asyncio.sleep(1.0)  # the server's writer waits on a full pipe meanwhile
        big = await _response(proc, 1)
        after = await _response(proc, 2)
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)
    text = big["result"]["content"][0]["text"]
    assert big["result"]["structuredContent"]["outcome"] == "ok"
    assert len(text) > 600_000 and "line 005999" in text
    assert after["result"]["structuredContent"]["outcome"] == "ok"
    assert proc.returncode == 0


async def test_responses_written_before_the_client_closes_stdin_reach_it(workspace: Path) -> None:
    lines = [f"row {i:06d} " + "y" * 90 for i in range(3000)]
    (workspace / "big.txt").write_text("\n".join(lines) + "\n")
    proc = await _start(workspace, {"tool_output": {"max_bytes": 4 << 20, "max_lines": 10_000}})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_init())
    await proc.stdin.drain()
    await _response(proc, 0)
    proc.stdin.write(_call(1, "read", {"path": "big.txt", "limit": 3000}))
    await proc.stdin.drain()
    # Wait until the server has started writing the answer (it fills the pipe), then hang up our
    # side of stdin without reading: the rest must still arrive before the process ends.
    await asyncio.sleep(1.0)
    proc.stdin.close()
    rest = await asyncio.wait_for(proc.stdout.read(), 60)
    await asyncio.wait_for(proc.wait(), 30)
    answers = [json.loads(line) for line in rest.splitlines() if line.strip()]
    big = next(a for a in answers if a.get("id") == 1)
    assert "row 002999" in big["result"]["content"][0]["text"]
    assert proc.returncode == 0

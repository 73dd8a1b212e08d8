"""``zuno mcp`` under a hostile client (seventeenth round): raw JSON-RPC on a real process's pipes.

The SDK answered a request before ``initialize`` and a request whose params have a field of the
wrong type with a bare -32602 "Invalid request parameters" (empty data), naming neither the field
nor the fix; serving goes on after each.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from conftest import zuno_env

LEGACY = "2025-11-25"


def _line(obj: Any) -> bytes:
    return (json.dumps(obj) + "\n").encode()


INIT = _line(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def _next(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert line, "the server closed stdout"
    return json.loads(line)


async def _serve(workspace: Path) -> asyncio.subprocess.Process:
    """``zuno mcp`` over stdio in a process of its own, its three pipes held by the test."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "mcp", "--root", str(workspace),
        env=zuno_env(), cwd=str(workspace),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_bare_invalid_params_are_named_and_serving_goes_on(workspace: Path) -> None:
    proc = await _serve(workspace)
    assert proc.stdin is not None
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    before = await _next(proc)
    assert before["id"] == 1 and before["error"]["code"] == -32602
    assert "before initialize" in before["error"]["message"] and "send initialize" in before["error"]["message"]
    proc.stdin.write(INIT)
    assert "result" in await _next(proc)
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": 5}}))
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": 5}}))
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
    cursor, meta, ping = await _next(proc), await _next(proc), await _next(proc)
    assert cursor["id"] == 2 and cursor["error"]["code"] == -32602
    assert "'params.cursor'" in cursor["error"]["message"] and "(got 5)" in cursor["error"]["message"]
    assert meta["id"] == 3 and "'params._meta'" in meta["error"]["message"]
    assert ping == {"jsonrpc": "2.0", "id": 4, "result": {}}
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0


async def test_a_line_that_is_not_utf8_is_a_parse_error_not_replacement_characters(workspace: Path) -> None:
    proc = await _serve(workspace)
    assert proc.stdin is not None
    proc.stdin.write(INIT)
    assert "result" in await _next(proc)
    call = {"name": "write", "arguments": {"path": "f.txt", "content": "AB"}}
    raw = _line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).replace(b"AB", b"A\xffB")
    proc.stdin.write(raw)
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    error, ping = await _next(proc), await _next(proc)
    assert error["id"] is None and error["error"]["code"] == -32700
    assert "not UTF-8" in error["error"]["message"] and "0xff" in error["error"]["message"]
    assert ping == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert not (workspace / "f.txt").exists()  # nothing written with a replacement character
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0

"""``zuno mcp`` probed from outside, the way a careless or hostile client drives it: raw bytes on
the real process's pipes, answers read back line by line.

JSON-RPC 2.0 (section 5.1) answers a line that is not JSON with -32700 and a message that is not a
valid request with -32600 (``id: null`` when its id cannot be read); MCP ids are strings or
integers, never null, and MCP has had no batches since 2025-06-18. Whatever comes in, the next
request is served, and nothing but JSON-RPC reaches stdout.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from zuno.limits import CALL_MAX_BYTES, MCP_TOOL_NAME_MAX, UNKNOWN_TOOL_NAME_SHOWN_MAX
from zuno.serve.mcp.stdio import MAX_LINE_BYTES

from conftest import zuno_env
from mcp_peers import MODES, HttpZuno, zuno_client

LEGACY = "2025-11-25"


def _line(obj: Any) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _init() -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        }
    ) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _ping(rid: int) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "method": "ping"})


async def _start(root: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "mcp", "--root", str(root),
        env=zuno_env(), cwd=str(root), limit=64 << 20,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _next(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert line, "the server closed stdout"
    msg = json.loads(line)  # nothing but JSON-RPC on stdout
    assert msg["jsonrpc"] == "2.0"
    return msg


async def _stop(proc: asyncio.subprocess.Process) -> bytes:
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    return await proc.stderr.read()


# (what the client wrote, the code it must get back, the id that answer carries)
MALFORMED: list[tuple[str, bytes, int, Any]] = [
    ("not JSON", b"this is not json\n", -32700, None),
    ("truncated JSON", b'{"jsonrpc":"2.0","id":5,"method":\n', -32700, None),
    ("a batch", _line([{"jsonrpc": "2.0", "id": 6, "method": "ping"}]), -32600, None),
    ("a bare number", b"42\n", -32600, None),
    ("params an array", _line({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": [1]}), -32602, 8),
    ("params a string", _line({"jsonrpc": "2.0", "id": "s", "method": "tools/list", "params": "x"}), -32602, "s"),
    (
        "arguments an array",
        _line({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "read", "arguments": [1]}}),
        -32602,
        12,
    ),
    (
        "arguments a string",
        _line({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {"name": "read", "arguments": "{}"}}),
        -32602,
        13,
    ),
    (
        "no tool name",
        _line({"jsonrpc": "2.0", "id": 14, "method": "tools/call", "params": {"arguments": {}}}),
        -32602,
        14,
    ),
    ("no jsonrpc member", _line({"id": 9, "method": "ping"}), -32600, 9),
    ("jsonrpc 1.0", _line({"jsonrpc": "1.0", "id": 10, "method": "ping"}), -32600, 10),
    ("method not a string", _line({"jsonrpc": "2.0", "id": 11, "method": 7}), -32600, 11),
    # An id that is not a string or an integer: before, each was read as a *notification* and
    # run without an answer.
    ("id null", _line({"jsonrpc": "2.0", "id": None, "method": "ping"}), -32600, None),
    ("id a fraction", _line({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), -32600, None),
    ("id a boolean", _line({"jsonrpc": "2.0", "id": True, "method": "ping"}), -32600, None),
    ("id an object", _line({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}), -32600, None),
]


@pytest.mark.parametrize(("label", "raw", "code", "rid"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_a_malformed_message_gets_its_json_rpc_error_and_serving_goes_on(
    workspace: Path, label: str, raw: bytes, code: int, rid: Any
) -> None:
    proc = await _start(workspace)
    assert proc.stdin is not None
    try:
        proc.stdin.write(_init())
        await _next(proc)
        proc.stdin.write(raw + _ping(100))
        await proc.stdin.drain()
        answer = await _next(proc)
        assert "error" in answer, f"{label}: {answer}"
        assert answer["error"]["code"] == code, answer
        assert answer["id"] == rid, answer
        assert answer["error"]["message"] not in ("", "Invalid request parameters"), answer  # it names the problem
        assert await _next(proc) == {"jsonrpc": "2.0", "id": 100, "result": {}}
    finally:
        stderr = await _stop(proc)
    assert b"Traceback" not in stderr


async def test_blank_lines_and_well_formed_oddities_are_not_refused(workspace: Path) -> None:
    """What is valid keeps working: blank lines are skipped, a string id and a big integer id are
    echoed, a client's response to nothing is ignored."""
    proc = await _start(workspace)
    assert proc.stdin is not None
    try:
        proc.stdin.write(_init())
        await _next(proc)
        proc.stdin.write(
            b"\n   \n"
            + _line({"jsonrpc": "2.0", "id": 77, "result": {}})
            + _line({"jsonrpc": "2.0", "id": "abc", "method": "ping"})
            + _line({"jsonrpc": "2.0", "id": 10**20, "method": "ping"})
            + _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}})
            + _ping(3)
        )
        await proc.stdin.drain()
        assert (await _next(proc))["id"] == "abc"
        assert (await _next(proc))["id"] == 10**20
        assert await _next(proc) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    finally:
        await _stop(proc)


async def test_a_message_over_the_line_limit_is_answered_and_serving_goes_on(workspace: Path) -> None:
    """Before, a line over MAX_LINE_BYTES ended the server ("internal error", exit 1) and the
    client's request was never answered."""
    proc = await _start(workspace)
    assert proc.stdin is not None
    try:
        proc.stdin.write(_init())
        await _next(proc)
        head = b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"write","arguments":'
        filler = b'{"path":"big.txt","content":"' + b"a" * (MAX_LINE_BYTES + (1 << 20)) + b'"}}}\n'
        proc.stdin.write(head + filler)
        proc.stdin.write(_ping(42))
        await proc.stdin.drain()
        answer = await _next(proc)
        assert answer["id"] == 41
        assert answer["error"]["code"] == -32600
        assert "256 MiB" in answer["error"]["message"]
        assert await _next(proc) == {"jsonrpc": "2.0", "id": 42, "result": {}}
    finally:
        stderr = await _stop(proc)
    assert b"internal error" not in stderr
    assert not (workspace / "big.txt").exists()


# A 1x1 PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.mark.parametrize("mode", MODES)
async def test_view_image_reaches_the_client_as_an_image_block(workspace: Path, mode: str) -> None:
    """Before, an MCP client's model got only the one-line text ("Image img.png: PNG -> ..."): the
    pixels were base64 inside structuredContent.metadata, where no client shows them as an image."""
    (workspace / "img.png").write_bytes(PNG_1X1)
    async with zuno_client(workspace, mode, "--profile", "chord") as c:
        schema = {t.name: t for t in (await c.list_tools()).tools}["view_image"].output_schema
        r = await c.call_tool("view_image", {"path": "img.png"})
    assert not r.is_error
    text, image = r.content[0], r.content[1]
    assert text.type == "text" and text.text.startswith("Image img.png:")
    assert image.type == "image" and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG_1X1  # an unchanged small PNG goes through byte for byte
    facts = r.structured_content["metadata"]["image"]
    assert "base64" not in facts and facts["mime"] == "image/png" and facts["width"] == 1
    jsonschema.validate(r.structured_content, schema)


PROFILE_CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "zuno": [
        ("shell", {"command": "echo hi"}),
        ("shell", {"command": "exit 3"}),
        ("read", {"path": "a.txt"}),
        ("read", {"path": "missing"}),
        ("write", {"path": "b.txt", "content": "x"}),
        ("glob", {"pattern": "*.txt"}),
        ("grep", {"pattern": "("}),
        ("webfetch", {"url": "notaurl"}),
        ("plan_update", {"action": "create", "objective": "o", "steps": [{"title": "s"}]}),
        ("plan_get", {}),
        ("todo_get", {}),
        ("goal_get", {}),
        ("bg", {"action": "list"}),
    ],
    "chord": [
        ("shell", {"command": "echo hi"}),
        ("read", {"path": "a.txt"}),
        ("edit", {"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
        ("job_list", {}),
        ("job_output", {"job_id": "nope"}),
        ("todo_write", {"todos": [{"content": "a", "status": "pending"}]}),
        ("web_fetch", {"url": "notaurl"}),
        ("view_image", {"path": "img.png"}),
    ],
}


@pytest.mark.parametrize("profile", sorted(PROFILE_CALLS))
async def test_every_listed_schema_is_valid_and_every_result_matches_its_output_schema(
    workspace: Path, profile: str
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "img.png").write_bytes(PNG_1X1)
    async with zuno_client(workspace, "legacy", "--profile", profile) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for t in tools.values():
            Draft202012Validator.check_schema(t.input_schema)
            assert t.output_schema is not None
            Draft202012Validator.check_schema(t.output_schema)
        calls = PROFILE_CALLS[profile] + [(name, {}) for name in tools]  # {}: mostly invalid_arguments
        for name, arguments in calls:
            r = await c.call_tool(name, arguments)
            assert r.structured_content is not None, name
            Draft202012Validator(tools[name].output_schema).validate(r.structured_content)


@pytest.mark.parametrize("mode", MODES)
async def test_http_takes_a_write_as_large_as_stdio_does(workspace: Path, mode: str) -> None:
    """Before, the SDK's default body limit (4 MiB) answered a 6 MiB write over HTTP with a bare
    413, though stdio wrote it and Zuno's own limit on a call is 32 MiB; a call over that limit is
    refused by admission, naming it, on HTTP too."""
    content = "z" * (6 << 20)
    async with HttpZuno(workspace) as z, z.client(mode) as c:
        wrote = await c.call_tool("write", {"path": "six.txt", "content": content})
        too_big = await c.call_tool("write", {"path": "forty.txt", "content": "y" * (CALL_MAX_BYTES + (8 << 20))})
    assert not wrote.is_error, wrote.content[0].text
    assert (workspace / "six.txt").stat().st_size == 6 << 20
    assert too_big.structured_content["block_kind"] == "invalid_arguments"
    assert "larger than 32 MiB" in too_big.content[0].text
    assert not (workspace / "forty.txt").exists()


HTTP_MALFORMED: list[tuple[str, bytes, int, Any]] = [
    ("id null", _line({"jsonrpc": "2.0", "id": None, "method": "ping"}), -32600, None),
    ("id a fraction", _line({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), -32600, None),
    ("a batch", _line([{"jsonrpc": "2.0", "id": 6, "method": "ping"}]), -32600, None),
    ("params an array", _line({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": [1]}), -32602, 8),
    ("not JSON", b"nope", -32700, None),
    (
        "arguments an array",
        _line({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "read", "arguments": [1]}}),
        -32602,
        9,
    ),
]


async def test_http_answers_a_malformed_body_with_its_json_rpc_error(workspace: Path) -> None:
    """Before, over HTTP an id that is null or a fraction made the request a notification (202, no
    answer ever) and a batch got -32602."""
    import httpx2

    async with HttpZuno(workspace, "--token", "tok") as z:
        headers = {
            "Authorization": "Bearer tok",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LEGACY,
        }
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            init = await http.post(z.url, content=_init().split(b"\n")[0])
            assert init.status_code == 200
            sid = {"Mcp-Session-Id": init.headers["mcp-session-id"]}
            for label, body, code, rid in HTTP_MALFORMED:
                r = await http.post(z.url, content=body, headers=sid)
                assert r.status_code == 400, (label, r.status_code, r.text)
                answer = r.json()
                assert (answer["error"]["code"], answer["id"]) == (code, rid), (label, answer)
            ok = await http.post(z.url, content=_ping(5), headers=sid)
            assert ok.status_code == 200 and '"id":5' in ok.text
            unauthenticated = await http.post(z.url, content=b"nope", headers={"Authorization": "Bearer wrong"})
            assert unauthenticated.status_code == 401  # the token is checked before anything reads the body


async def test_an_unknown_tool_name_of_megabytes_is_not_echoed_whole(workspace: Path) -> None:
    """Before, a 2,000,000-character unknown tool name came back whole in the refusal (a 2 MB
    result in the model's context) and was stored whole in the record and the event log."""
    huge = "x" * 2_000_000
    at_limit = "y" * UNKNOWN_TOOL_NAME_SHOWN_MAX
    async with zuno_client(workspace, "legacy") as c:
        r = await c.call_tool(huge, {})
        kept = await c.call_tool(at_limit, {})
    assert r.structured_content["block_kind"] == "unavailable"
    text = r.content[0].text
    assert len(text) < 2_000 and "(2,000,000 characters)" in text and "x" * MCP_TOOL_NAME_MAX in text
    assert f"tool '{at_limit}' is not available" in kept.content[0].text  # up to the limit: whole
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "events", "--root", str(workspace), "--continue", "--json",
        env=zuno_env(), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    events, _ = await proc.communicate()
    assert proc.returncode == 0
    assert b"(2,000,000 characters)" in events and len(events) < 100_000


async def test_an_unknown_action_of_a_state_tool_says_what_it_got(workspace: Path) -> None:
    """Before, todo_update with action "create" (an action plan_update has) was told
    "argument '(arguments)' argument 'action' is required", though it was there."""
    async with zuno_client(workspace, "legacy") as c:
        wrong = await c.call_tool("todo_update", {"action": "create", "items": [{"title": "a"}]})
        absent = await c.call_tool("plan_update", {})
    assert wrong.structured_content["block_kind"] == "invalid_arguments"
    text = wrong.content[0].text
    assert "argument 'action' must be one of: add, patch, remove (got \"create\")" in text, text
    assert "(arguments)" not in text
    assert "argument 'action' is required (one of: create, patch, append, push, pop)" in absent.content[0].text

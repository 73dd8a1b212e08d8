"""MCP from outside, tenth round: ``zuno mcp`` as a real process driven by raw JSON-RPC (stdio
pipes, HTTP with httpx), and Zuno as a client of real servers that misbehave on purpose.

One test per defect found (docs/spec-coverage.md, "MCP — outside testing (tenth round)").
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import zuno
from zuno import limits

from conftest import zuno_env
from mcp_peers import HttpZuno

LEGACY = "2025-11-25"
SERVER = str(Path(__file__).with_name("mcp_misbehaving_server.py"))
PAGING = str(Path(__file__).with_name("mcp_paging_server.py"))


def _line(obj: Any) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _initialize(rid: Any = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }


async def _start(root: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "mcp", "--root", str(root),
        env=zuno_env(), cwd=str(root), limit=16 << 20,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _next(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert line, "the server closed stdout"
    return json.loads(line)


# -- zuno mcp over stdio ----------------------------------------------------------------------------


@pytest.mark.parametrize("token", [0, ""], ids=["zero", "empty string"])
async def test_a_progress_token_of_zero_or_empty_still_gets_progress(workspace: Path, token: Any) -> None:
    """A progress token is any string or integer: 0 and "" were taken for "no token" and a long
    call sent no progress at all."""
    proc = await _start(workspace)
    assert proc.stdin is not None
    try:
        proc.stdin.write(_line(_initialize()) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await _next(proc)
        call = {"name": "shell", "arguments": {"command": "sleep 1.6"}, "_meta": {"progressToken": token}}
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}))
        await proc.stdin.drain()
        progress: list[dict[str, Any]] = []
        while (msg := await _next(proc)).get("id") != 1:
            if msg.get("method") == "notifications/progress":
                progress.append(msg["params"])
        assert msg["result"]["structuredContent"]["outcome"] == "ok"
        assert progress and all(p["progressToken"] == token for p in progress), progress
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)


async def test_a_tools_list_cursor_zuno_never_gave_is_invalid_params(workspace: Path) -> None:
    """zuno mcp lists every tool in one page and sends no nextCursor; a cursor it never gave got
    the whole list again, as if it were the first page (MCP: an invalid cursor SHOULD be -32602)."""
    proc = await _start(workspace)
    assert proc.stdin is not None
    try:
        proc.stdin.write(_line(_initialize()) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await _next(proc)
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "page-2"}}))
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        await proc.stdin.drain()
        bad, good = await _next(proc), await _next(proc)
        assert bad["id"] == 1 and bad["error"]["code"] == -32602, bad
        assert "'page-2'" in bad["error"]["message"] and "without a cursor" in bad["error"]["message"]
        assert good["id"] == 2 and good["result"]["tools"] and "nextCursor" not in good["result"]
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)


# -- zuno mcp over streamable HTTP ------------------------------------------------------------------


def _sse_result(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return json.loads(line[5:])
    return response.json()


async def _http_session(http: httpx.AsyncClient, z: HttpZuno) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {"Authorization": f"Bearer {z.token}", "Accept": "application/json, text/event-stream"}
    r = await http.post(z.url, json=_initialize(1), headers=headers)
    init = _sse_result(r)
    headers |= {"Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    r = await http.post(z.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert r.status_code == 202
    return headers, init


async def test_http_handshake_says_the_tool_list_changes_as_stdio_does(workspace: Path) -> None:
    """tool_search expands the listing and a legacy client is sent tools/list_changed; over HTTP
    the handshake said ``listChanged: false`` (the SDK's manager builds default options), so a
    client that trusts the capability never re-listed."""
    async with HttpZuno(workspace) as z, httpx.AsyncClient(timeout=30) as http:
        _headers, init = await _http_session(http, z)
    assert init["result"]["capabilities"]["tools"] == {"listChanged": True}


def _running(marker: str) -> list[int]:
    """The pids whose command line holds marker (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


async def test_deleting_an_http_session_closes_its_zuno_session_and_ends_its_jobs(workspace: Path) -> None:
    """DELETE of a legacy HTTP session (or its idle timeout) left its Zuno session open until the
    server exited: its background jobs kept running and the session was never closed. Now the
    Zuno session closes with the connection; a call in flight settles and is recorded first."""
    tag = f"{os.getpid() % 1000:03d}.{time.time_ns() % 10**6:06d}"
    bg_secs, fg_secs = f"3{tag}", f"4{tag}"  # marks the processes of this test in /proc
    async with HttpZuno(workspace) as z, httpx.AsyncClient(timeout=60) as http:
        headers, _ = await _http_session(http, z)
        bg = {"name": "shell", "arguments": {"command": f"sleep {bg_secs}", "run_in_background": True}}
        started = _sse_result(
            await http.post(
                z.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": bg}, headers=headers
            )
        )
        facts = started["result"]["structuredContent"]
        assert facts["outcome"] == "ok", facts
        # The job's shell may not have exec'd its `sleep` yet when the start is answered (a loaded
        # CI machine showed that window): wait for the process, boundedly, before going on.
        for _ in range(200):
            if _running(bg_secs):
                break
            await asyncio.sleep(0.05)
        assert _running(bg_secs), "the background job never started its process"
        fg = {"name": "shell", "arguments": {"command": f"sleep {fg_secs}"}}
        call = asyncio.create_task(
            http.post(z.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": fg}, headers=headers)
        )
        for _ in range(200):
            if _running(fg_secs):
                break
            await asyncio.sleep(0.05)
        r = await http.delete(z.url, headers=headers)
        assert r.status_code == 200
        await asyncio.wait_for(call, 30)
        for _ in range(200):  # the job ends with its session, not with the server
            if not _running(bg_secs) and not _running(fg_secs):
                break
            await asyncio.sleep(0.05)
        assert not _running(bg_secs), "the session's job outlived its DELETEd session"
        assert not _running(fg_secs)
        assert z.proc.returncode is None  # the server itself still serves
        async with zuno.Runtime(root=workspace) as rt:
            events = [e["kind"] for e in rt.store.events(facts["session"])]
            calls = rt.store.calls(facts["session"])
    assert "session-closed" in events
    # the call in flight settled (cancelled) and was recorded before the close
    assert [c.cancelled for c in calls if c.name == "shell"] == [False, True], calls


async def test_a_legacy_http_session_serves_only_the_token_that_opened_it(workspace: Path) -> None:
    """With two --token clients, the one holding the second token could call tools in, and DELETE,
    a session the first one opened (given its Mcp-Session-Id): the SDK checks a session's owner
    only when the request names its principal, which Zuno's bearer check did not. Now the other
    token gets the 404 an unknown session gets, and the owner's session is untouched."""
    async with HttpZuno(workspace, "--token", "first-token", "--token", "second-token") as z:
        z.token = "first-token"
        async with httpx.AsyncClient(timeout=30) as http:
            headers, _ = await _http_session(http, z)
            other = headers | {"Authorization": "Bearer second-token"}
            call = {"name": "read", "arguments": {"path": "."}}
            r = await http.post(
                z.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, headers=other
            )
            assert r.status_code == 404, r.text
            assert (await http.delete(z.url, headers=other)).status_code == 404
            mine = await http.post(
                z.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}, headers=headers
            )
            assert _sse_result(mine)["result"]["structuredContent"]["outcome"] == "ok"


@pytest.mark.parametrize("version", ["1999-01-01", "garbage", ""])
async def test_an_unsupported_protocol_version_header_is_named_with_the_versions_served(
    workspace: Path, version: str
) -> None:
    """An MCP-Protocol-Version header naming no version this server speaks got "params._meta must
    be an object carrying the required ... envelope keys" (the SDK took it for the 2026-07-28 wire):
    now 400 with -32022 naming the header's value and every version served."""
    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    async with HttpZuno(workspace) as z, httpx.AsyncClient(timeout=30) as http:
        headers, _ = await _http_session(http, z)
        ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        r = await http.post(z.url, json=ping, headers=headers | {"MCP-Protocol-Version": version})
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["code"] == -32022 and repr(version) in error["message"], error
        assert error["data"] == {"supported": list(SUPPORTED_PROTOCOL_VERSIONS), "requested": version}
        assert all(v in error["message"] for v in SUPPORTED_PROTOCOL_VERSIONS)
        ok = await http.post(z.url, json=ping, headers=headers)  # the session itself is untouched
        assert _sse_result(ok)["result"]["tools"]


async def test_http_on_a_port_in_use_is_a_usage_error_and_port_zero_names_the_port(workspace: Path) -> None:
    """A port in use printed "zuno mcp: serving http://127.0.0.1:PORT/mcp", then uvicorn's own
    "ERROR: [Errno 98] ..." and exit status 3 (undocumented); port 0 was announced as ":0". Now
    the socket is bound first: exit 2 naming the address, and the port actually bound is shown."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "zuno", "mcp", "--root", str(workspace), "--http", f"127.0.0.1:{port}",
            "--token", "t", env=zuno_env(), stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    text = err.decode()
    assert proc.returncode == 2, text
    assert f"127.0.0.1:{port}" in text and "cannot listen there" in text and "serving" not in text, text
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "mcp", "--root", str(workspace), "--http", "127.0.0.1:0", "--token", "t",
        env=zuno_env(), stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line.startswith("zuno mcp: serving http://127.0.0.1:") and ":0/" not in line, line
        url = line.split("serving ", 1)[1].strip()
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {"Authorization": "Bearer t", "Accept": "application/json, text/event-stream"}
            assert _sse_result(await http.post(url, json=_initialize(1), headers=headers))["result"]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


# -- Zuno as an MCP client --------------------------------------------------------------------------


def _server(*args: str, **entry: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, *args], "timeout_ms": 20000, **entry}


async def test_a_connected_tool_named_like_a_resource_tool_is_refused_not_shadowed(workspace: Path) -> None:
    """Server "resource" with tools "read" and "list" gives mcp_resource_read / mcp_resource_list,
    Zuno's own resource tools: the server's tools were silently replaced by them. Now it is the
    name collision the docs promise, naming both."""
    cfg = {"mcp": {"resource": _server("--resource-names")}, "tool_search": {"defer": "never"}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        with pytest.raises(zuno.ConfigError) as e:
            await rt.session().open()
    assert "mcp_resource_read" in str(e.value) and "'read'" in str(e.value) and "built-in" in str(e.value)


async def test_every_page_of_a_long_tool_list_is_registered(workspace: Path) -> None:
    """Only the first 100 pages of a server's tools/list were read, silently: in pages of 10,
    tool 1000 and later were missing."""
    cfg = {"mcp": {"p": {"command": sys.executable, "args": [PAGING, "1500", "10"]}}, "tool_search": {"defer": "never"}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "mcp_p_t1499", "arguments": {}}])
            names = {n for n in rt.surface.tools if n.startswith("mcp_p_")}
    assert len(names) == 1500
    assert res.results[0].outcome is zuno.Outcome.ok and res.results[0].text == "t1499"


async def test_a_tool_list_cursor_that_never_ends_is_a_start_failure_naming_it(workspace: Path) -> None:
    cfg = {"mcp": {"p": {"command": sys.executable, "args": [PAGING, "5", "5", "--stuck"]}}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "read", "arguments": {"path": "."}}])
    failed = [n["text"] for n in res.notices if n["kind"] == "mcp_server_failed"]
    assert failed and "cursor 'again' twice" in failed[0], res.notices
    assert limits.MCP_TOOL_LIST_PAGES_MAX >= 1000


async def test_a_server_that_fails_to_start_is_named_with_what_it_said(workspace: Path) -> None:
    """The notice said only "MCPError: Connection closed": now the last line the server wrote to
    stderr, and where its whole log is."""
    cfg = {"mcp": {"bad": _server("--fail-at-start", "fatal: MY_API_KEY is not set")}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "read", "arguments": {"path": "."}}])
    failed = [n["text"] for n in res.notices if n["kind"] == "mcp_server_failed"]
    assert failed, res.notices
    assert "fatal: MY_API_KEY is not set" in failed[0] and ".zuno/logs/mcp/bad.log" in failed[0], failed[0]


async def test_a_slow_start_with_a_short_call_timeout_still_starts(workspace: Path) -> None:
    """Starting may take at least 30 s (limits.MCP_START_TIMEOUT_MIN_S) whatever timeout_ms says:
    but the SDK's own request timeout was timeout_ms, so with 500 ms a server that took 11 s to
    start (past the SDK's 10 s discover probe) failed its handshake."""
    cfg = {"mcp": {"bad": _server("--start-after", "11", timeout_ms=500)}, "tool_search": {"defer": "never"}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "mcp_bad_idem", "arguments": {"key": "k"}}])
    assert not [n for n in res.notices if n["kind"] == "mcp_server_failed"], res.notices
    assert res.results[0].outcome is zuno.Outcome.ok and res.results[0].text == "set k"


def test_a_server_that_prints_to_stdout_leaves_no_traceback_on_zunos_stderr(run_zuno: Any, workspace: Path) -> None:
    """Each stdout line of a server that is not JSON-RPC (a banner, a stray print) put an 11-line
    traceback of the SDK's on Zuno's stderr: the terminal of `zuno run`, the MCP client's log of
    `zuno mcp`. It is noted in the server's own log instead."""
    junk = str(Path(__file__).with_name("mcp_garbage_server.py"))
    cfg = {"mcp": {"junk": {"command": sys.executable, "args": [junk], "timeout_ms": 5000}}}
    cfg["tool_search"] = {"defer": "never"}
    calls = json.dumps([{"name": "mcp_junk_mangle", "arguments": {}}])
    p = run_zuno("batch", "-", input=calls, env={"ZUNO_CONFIG_CONTENT": json.dumps(cfg)})
    assert p.returncode == 1, p.stderr  # the call's own outcome: uncertain, naming the server
    assert json.loads(p.stdout)["results"][0]["outcome"] == "uncertain"
    assert "Traceback" not in p.stderr and "Failed to parse" not in p.stderr, p.stderr
    log = (workspace / ".zuno" / "logs" / "mcp" / "junk.log").read_text()
    assert "not JSON-RPC was ignored: 'this is not JSON-RPC at all'" in log, log


async def test_a_refusal_does_not_list_thousands_of_connected_tools(workspace: Path) -> None:
    """An unknown tool's refusal listed every tool "available": with a server of 2,000 tools (whose
    schemas deferral keeps out of the prompt) that was 2,000 names in one result. Now Zuno's own
    tools and connected ones up to limits.AVAILABLE_TOOLS_SHOWN_MAX, then how many more."""
    cfg = {"mcp": {"p": {"command": sys.executable, "args": [PAGING, "2000", "500"]}}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "mcp_p_t20000", "arguments": {}}, {"arguments": {}}])
    unknown, nameless = (r.text for r in res.results)
    for text in (unknown, nameless):
        assert "tool_search" in text and "read" in text, text
        assert "more connected MCP tools (tool_search finds them)" in text, text
        assert text.count("mcp_p_t") <= limits.AVAILABLE_TOOLS_SHOWN_MAX + 1, text
    assert "Did you mean 'mcp_p_t200'" in unknown  # the suggestion still looks at every tool


async def test_a_tool_whose_input_schema_is_broken_is_left_out_not_a_crash(workspace: Path) -> None:
    """A connected tool whose input schema is not valid JSON Schema ("type": "strng") made the
    whole step fail ("zuno: internal error: UnknownType", every other call of it lost); a $ref to
    nowhere did the same. Now the first is left out at start with a notice naming it, and a call
    of the second is refused (nothing sent), the rest of the step running."""
    cfg = {"mcp": {"p": {"command": sys.executable, "args": [PAGING, "1", "5", "--bad-schemas"]}}}
    cfg["tool_search"] = {"defer": "never"}
    calls = [
        {"name": "mcp_p_badtype", "arguments": {"a": 1}},
        {"name": "mcp_p_badref", "arguments": {"a": 1}},
        {"name": "mcp_p_t0", "arguments": {}},
    ]
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step(calls)
    left = [n["text"] for n in res.notices if n["kind"] == "mcp_tool_left_out"]
    assert left and "'badtype'" in left[0] and "not valid JSON Schema" in left[0], res.notices
    badtype, badref, fine = res.results
    assert badtype.block_kind is zuno.BlockKind.unavailable
    assert badref.outcome is zuno.Outcome.blocked and "cannot be checked" in badref.text, badref.text
    assert fine.outcome is zuno.Outcome.ok and fine.text == "t0"


async def test_an_http_server_that_refuses_the_bearer_is_named_with_its_status(tmp_path: Path, workspace: Path) -> None:
    """A connected HTTP server that answered 401 to a wrong bearer was told only "could not be
    started: MCPError: Server returned an error response": now the HTTP status and what to check."""
    served = tmp_path / "served"
    served.mkdir()
    async with HttpZuno(served, "--token", "the-right-one") as z:
        cfg = {"mcp": {"h": {"url": z.url, "bearer": "a-wrong-one", "timeout_ms": 10000}}}
        async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
            async with rt.session() as s:
                res = await s.step([{"name": "read", "arguments": {"path": "."}}])
    failed = [n["text"] for n in res.notices if n["kind"] == "mcp_server_failed"]
    assert failed and "HTTP 401" in failed[0] and "bearer" in failed[0], res.notices


async def test_listing_resources_skips_servers_that_declare_none(workspace: Path) -> None:
    """mcp_resource_list asked every connected server, and one that declares no resources (most
    servers) answered "Method not found": listed as an [error] line, and the whole listing was an
    error when no server had any. Such a server is skipped, and said to declare none."""
    cfg = {
        "mcp": {"p": {"command": sys.executable, "args": [PAGING, "1", "5"]}, "bad": _server()},
        "tool_search": {"defer": "never"},
    }
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step(
                [
                    {"name": "mcp_resource_list", "arguments": {}},
                    {"name": "mcp_resource_list", "arguments": {"server": "p"}},
                ]
            )
    every, only_p = res.results
    assert every.outcome is zuno.Outcome.ok and every.text == "bad\tnote://hello\thello\ttext/plain", every.text
    assert only_p.outcome is zuno.Outcome.ok, only_p.text
    assert only_p.text == "no resources (MCP server 'p' declares none)" and "[error]" not in only_p.text


def test_a_link_failure_is_one_sentence_whatever_its_message_ends_with() -> None:
    from zuno.connect.mcp.link import LinkError
    from zuno.connect.mcp.tools import link_failure
    from zuno.declarations import READ_ONLY_PARALLEL, Declarations

    for message in ("the server closed the connection", "the server stopped answering requests."):
        for decl in (READ_ONLY_PARALLEL, Declarations()):
            text = link_failure(LinkError("git", "crashed", message), decl).text
            assert ".." not in text and message.rstrip(".") + ". " in text, text

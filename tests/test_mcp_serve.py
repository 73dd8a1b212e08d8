"""``zuno mcp`` over stdio, driven by the official SDK's client on both protocol revisions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import jsonschema
import pytest

from mcp_peers import MODES, zuno_client


def _facts(result):
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_listing_carries_schemas_and_annotations_from_declarations(workspace: Path, mode: str) -> None:
    async with zuno_client(workspace, mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    read, write, shell, bg = tools["read"], tools["write"], tools["shell"], tools["bg"]
    assert read.input_schema["type"] == "object" and "path" in read.input_schema["properties"]
    a = read.annotations
    assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (True, False, True, False)
    a = write.annotations
    assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (False, True, False, False)
    assert shell.annotations.open_world_hint is True and shell.annotations.destructive_hint is True
    # bg is mixed: annotated by its strictest action (cancel), and it says so.
    assert bg.annotations.read_only_hint is False and bg.annotations.destructive_hint is True
    assert "strictest action" in bg.description and "cancel: SideEffecting" in bg.description
    assert all(t.output_schema is not None for t in tools.values())


@pytest.mark.parametrize("mode", MODES)
async def test_every_outcome_keeps_its_facts_and_matches_the_output_schema(workspace: Path, mode: str) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    async with zuno_client(workspace, mode) as c:
        schema = {t.name: t for t in (await c.list_tools()).tools}["read"].output_schema
        ok = await c.call_tool("read", {"path": "a.txt"})
        err = await c.call_tool("read", {"path": "missing.txt"})
        bad = await c.call_tool("read", {"nope": 1})
        unknown = await c.call_tool("no_such_tool", {})
        wrote = await c.call_tool("write", {"path": "b.txt", "content": "beta\n"})
    assert not ok.is_error and _facts(ok)["outcome"] == "ok" and "alpha" in ok.content[0].text
    assert err.is_error and _facts(err)["outcome"] == "error"
    assert bad.is_error and _facts(bad)["block_kind"] == "invalid_arguments"
    assert bad.content[0].text.startswith("[blocked: invalid_arguments]")
    assert unknown.is_error and _facts(unknown)["block_kind"] == "unavailable"
    assert _facts(wrote)["writtenPaths"] and (workspace / "b.txt").read_text() == "beta\n"
    for r in (ok, err, bad, unknown, wrote):
        jsonschema.validate(r.structured_content, schema)
    assert unknown.content[0].text.startswith("[blocked: unavailable] tool 'no_such_tool' is not available")
    assert unknown.content[0].text.endswith("Nothing ran.")


@pytest.mark.parametrize("mode", MODES)
async def test_withheld_output_is_paged_back_through_bg(workspace: Path, mode: str) -> None:
    body = "".join(f"line {i:05d}\n" for i in range(3000))
    (workspace / "big.txt").write_text(body)
    config = {"tool_output": {"max_bytes": 2000}}
    async with zuno_client(workspace, mode, config=config) as c:
        r = await c.call_tool("shell", {"command": "cat big.txt"})
        withheld = _facts(r)["withheldOutput"]
        assert withheld["read"]["name"] == "bg" and "bg" in r.content[0].text
        got = b""
        cursor = 0
        for _ in range(200):
            page = await c.call_tool(
                "bg", {"action": "artifact", "outputPath": withheld["outputPath"], "cursor": cursor, "limit": 51200}
            )
            assert not page.is_error, page.content[0].text
            meta = _facts(page)["metadata"]
            got += page.content[0].text.encode() if "content" not in meta else meta["content"].encode()
            nxt = meta.get("nextCursor")
            if nxt is None or meta.get("eof") or nxt == cursor:
                break
            cursor = nxt
    assert withheld["bytes"] == len(body.encode())
    assert b"line 02999" in got


@pytest.mark.parametrize("mode", MODES)
async def test_a_background_job_is_read_in_later_requests_and_its_notice_arrives_once(
    workspace: Path, mode: str
) -> None:
    async with zuno_client(workspace, mode) as c:
        started = await c.call_tool("shell", {"command": "echo bg-out; sleep 0.3", "run_in_background": True})
        task = _facts(started)["metadata"]["background"]["taskID"]
        waited = await c.call_tool("bg", {"action": "wait", "taskID": task})
        assert "bg-out" in waited.content[0].text
        seen: list[str] = []
        for _ in range(30):
            r = await c.call_tool("bg", {"action": "list"})
            seen += [n["kind"] for n in _facts(r)["notices"]]
            if "job_completed" in seen:
                break
            await asyncio.sleep(0.1)
        again = await c.call_tool("bg", {"action": "output", "taskID": task})
    assert "bg-out" in again.content[0].text
    assert seen.count("job_completed") <= 1
    assert "job_completed" not in [n["kind"] for n in _facts(again)["notices"]]


@pytest.mark.parametrize("mode", MODES)
async def test_resumed_session_gets_the_recovery_notice_in_the_next_result_once(workspace: Path, mode: str) -> None:
    import zuno

    async with zuno.Runtime(root=workspace) as rt:
        async with rt.session() as s:
            sid = s.id
            n = rt.store.begin_step(sid)
            from zuno.store.calls import CallEntry

            lost = CallEntry(
                "intent", sid, n, 0, "call_lost", "write", {"path": "x", "content": "y"},
                zuno.Declarations().as_dict(), started_at=1.0,
            )  # fmt: skip
            rt.store.write_intents([lost])  # a Never call's intent row, never settled
    async with zuno_client(workspace, mode, "--session", sid) as c:
        first = await c.call_tool("read", {"path": "."})
        second = await c.call_tool("read", {"path": "."})
    async with zuno_client(workspace, mode, "--continue") as c:
        third = await c.call_tool("read", {"path": "."})
    kinds = [n["kind"] for n in _facts(first)["notices"]]
    assert kinds == ["uncertain_call"] and "call_lost" in first.content[-1].text
    assert _facts(first)["session"] == sid == _facts(third)["session"]
    assert _facts(second)["notices"] == [] and _facts(third)["notices"] == []


async def test_connected_mcp_tools_are_served_with_open_world_and_untrusted_declarations(workspace: Path) -> None:
    import sys

    server = str(Path(__file__).with_name("mcp_misbehaving_server.py"))
    config = {"mcp": {"bad": {"command": sys.executable, "args": [server]}}, "tool_search": {"defer": "never"}}
    async with zuno_client(workspace, "legacy", config=config) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    peek = tools["mcp_bad_peek"].annotations
    assert peek.open_world_hint is True and peek.read_only_hint is False and peek.destructive_hint is True
    assert tools["mcp_resource_read"].annotations.read_only_hint is True


async def test_an_unknown_session_is_a_usage_error(workspace: Path) -> None:
    import subprocess
    import sys

    from conftest import zuno_env

    p = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "zuno", "mcp", "--root", str(workspace), "--session", "ses_nope"],
        env=zuno_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert p.returncode == 2 and "ses_nope" in p.stderr and "Traceback" not in p.stderr


async def test_tool_search_over_mcp_expands_the_listing(workspace: Path) -> None:
    import sys

    import mcp_types as types

    server = str(Path(__file__).with_name("mcp_misbehaving_server.py"))
    config = {"mcp": {"bad": {"command": sys.executable, "args": [server]}}, "tool_search": {"defer": "always"}}
    changed: list[str] = []

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification) and "list_changed" in str(message):
            changed.append("tools")

    async with zuno_client(workspace, "legacy", config=config, message_handler=on_message) as c:
        before = {t.name for t in (await c.list_tools()).tools}
        found = await c.call_tool("tool_search", {"query": "mcp_bad_env"})
        after = {t.name for t in (await c.list_tools(cache_mode="refresh")).tools}
    assert "tool_search" in before and "mcp_bad_env" not in before
    assert _facts(found)["metadata"]["matches"][0] == "mcp_bad_env"
    assert "mcp_bad_env" in after and changed


async def test_sigterm_stops_the_stdio_server_at_once_with_143(workspace: Path) -> None:
    import signal
    import sys

    from conftest import zuno_env

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "zuno", "mcp", "--root", str(workspace),
        env=zuno_env(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    for _ in range(200):  # the session is opened before the server reads anything
        if (workspace / ".zuno" / "zuno.db").exists():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    proc.send_signal(signal.SIGTERM)  # stdin stays open: the server must not wait for a line
    rc = await asyncio.wait_for(proc.wait(), 20)
    assert rc == 143


async def test_new_session_names_the_session(workspace: Path) -> None:
    async with zuno_client(workspace, "legacy", "--new-session", "ses_from_mcp") as c:
        r = await c.call_tool("read", {"path": "."})
    assert _facts(r)["session"] == "ses_from_mcp"

"""Zuno as an MCP client, against a real SDK server that misbehaves on purpose."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import zuno

SERVER = str(Path(__file__).with_name("mcp_misbehaving_server.py"))


def _cfg(**server: Any) -> dict[str, Any]:
    extra = server.pop("_extra", {})
    entry = {"command": sys.executable, "args": [SERVER], "timeout_ms": 20000, **server}
    return {"mcp": {"bad": entry}, "tool_search": {"defer": "never"}, **extra}


async def _one(s: zuno.Session, name: str, **arguments: Any) -> zuno.CallRecord:
    return (await s.step([{"name": name, "arguments": arguments}])).results[0]


async def test_untrusted_annotations_never_loosen_and_strict_mode_asks(workspace: Path) -> None:
    cfg = _cfg(_extra={"permission": {"strict": True}})
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            wipe = await _one(s, "mcp_bad_wipe", target=str(workspace / "marker"))
            res = await _one(s, "mcp_resource_read", server="bad", uri="note://hello")
    # wipe claims readOnlyHint: from an untrusted server that is not believed
    assert wipe.declarations == zuno.Declarations()  # SideEffecting / Never / Exclusive
    assert wipe.outcome is zuno.Outcome.blocked and wipe.block_kind is zuno.BlockKind.denied
    assert "strict mode" in wipe.text and not (workspace / "marker").exists()
    # resource reads are ReadOnly: no strict prompt
    assert res.outcome is zuno.Outcome.ok and "hello from a resource" in res.text


async def test_trusted_read_only_tools_overlap_and_overrides_win(workspace: Path) -> None:
    cfg = _cfg(
        trusted=True, declarations={"idem": {"concurrency": "ParallelSafe"}, "peek": {"effect": "SideEffecting"}}
    )
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            step = await s.step([{"name": "mcp_bad_slow", "arguments": {"ms": 600}} for _ in range(2)])
            decl = {n: rt.surface.tools[n].declarations for n in ("mcp_bad_slow", "mcp_bad_idem", "mcp_bad_peek")}
    a, b = step.results
    assert a.outcome is b.outcome is zuno.Outcome.ok
    assert a.started_at < b.ended_at and b.started_at < a.ended_at  # they overlapped
    assert decl["mcp_bad_slow"] == zuno.Declarations("ReadOnly", "Safe", "ParallelSafe")
    assert decl["mcp_bad_idem"] == zuno.Declarations("SideEffecting", "Safe", "ParallelSafe")
    assert decl["mcp_bad_peek"] == zuno.Declarations("SideEffecting", "Safe", "ParallelSafe")


async def test_allowed_tools_limits_what_is_registered(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=_cfg(allowed_tools=["peek", "env"])) as rt:
        async with rt.session():
            names = sorted(n for n in rt.surface.tools if n.startswith("mcp_bad_"))
    assert names == ["mcp_bad_env", "mcp_bad_peek"]


async def test_a_server_killed_mid_call_or_hanging_is_a_typed_result_and_reconnects(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    async with zuno.Runtime(root=workspace, config_overrides=_cfg(timeout_ms=2000, trusted=True)) as rt:
        async with rt.session() as s:
            crashed = await _one(s, "mcp_bad_crash")
            after = await _one(s, "mcp_bad_peek", path=str(workspace / "a.txt"))
            hung = await _one(s, "mcp_bad_hang")
            again = await _one(s, "mcp_bad_peek", path=str(workspace / "a.txt"))
            steady = await _one(s, "mcp_bad_peek", path=str(workspace / "a.txt"))
    assert crashed.outcome is zuno.Outcome.uncertain and "MCP server 'bad' died" in crashed.text
    assert crashed.metadata["mcpError"] == {"server": "bad", "kind": "crashed"}
    assert after.outcome is zuno.Outcome.ok and "restarted" in after.text and "alpha" in after.text
    assert hung.outcome is zuno.Outcome.uncertain and hung.metadata["mcpError"]["kind"] == "timeout"
    assert hung.ended_at - hung.started_at < 15
    assert again.outcome is zuno.Outcome.ok and "did not answer" in again.text
    assert "restarted" not in steady.text  # the reconnection is said once


async def test_a_name_collision_is_refused_at_start(workspace: Path) -> None:
    cfg = _cfg()
    cfg["mcp"]["bad"]["args"] = [SERVER, "--clash"]
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        with pytest.raises(zuno.ConfigError) as e:
            await rt.session().open()
    assert "mcp_bad_a_b" in str(e.value) and "'a.b'" in str(e.value) and "'a_b'" in str(e.value)


async def test_stderr_goes_to_the_log_big_results_are_withheld_env_is_withheld(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZUNO_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("PLAIN_HOST_VAR", "1")
    cfg = _cfg(trusted=True, env={"GIVEN_VAR": "x", "ZUNO_SNEAKY": "y"})
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            flood = await _one(s, "mcp_bad_flood", mib=2)
            big = await _one(s, "mcp_bad_big", mib=10)
            env = await _one(s, "mcp_bad_env")
            pic = await _one(s, "mcp_bad_picture")
            doc = await _one(s, "mcp_bad_doc")
    assert flood.outcome is zuno.Outcome.ok and "EEEE" not in flood.text
    log = workspace / ".zuno" / "logs" / "mcp" / "bad.log"
    assert log.stat().st_size > 1 << 20
    assert big.outcome is zuno.Outcome.ok and big.metadata["withheldOutput"]["bytes"] == 10 << 20
    assert len(big.text) < 4096
    names = set(json.loads(env.text))
    assert "GIVEN_VAR" in names and "PLAIN_HOST_VAR" in names
    assert not {n for n in names if n.upper().startswith("ZUNO")}
    assert pic.metadata["mcp"]["content"][0]["type"] == "image"
    assert (workspace / pic.metadata["mcp"]["content"][0]["path"]).read_bytes().startswith(b"\x89PNG")
    assert "embedded body" in doc.text


async def test_tool_search_expands_the_surface_from_the_next_step_and_after_restart(workspace: Path) -> None:
    cfg = _cfg()
    cfg["tool_search"] = {"defer": "always"}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            before = {t.name for t in s.visible_tools()}
            found = await _one(s, "tool_search", query="image picture")
            exact = await _one(s, "tool_search", query="mcp_bad_env")
            after = {t.name for t in s.visible_tools()}
            callable_anyway = await _one(s, "mcp_bad_big", mib=0)
            sid = s.id
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session(sid) as s:
            restarted = {t.name for t in s.visible_tools()}
    assert "tool_search" in before and not {n for n in before if n.startswith("mcp_bad_")}
    assert found.metadata["matches"][0] == "mcp_bad_picture"
    assert exact.metadata["matches"][0] == "mcp_bad_env"
    assert {"mcp_bad_picture", "mcp_bad_env"} <= after
    assert callable_anyway.outcome is zuno.Outcome.ok
    assert {"mcp_bad_picture", "mcp_bad_env"} <= restarted and "mcp_bad_hang" not in restarted


async def test_a_server_that_cannot_start_is_a_notice_not_a_crash(workspace: Path) -> None:
    cfg = {"mcp": {"gone": {"command": str(workspace / "no-such-server"), "timeout_ms": 5000}}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "read", "arguments": {"path": "."}}])
    assert any(n["kind"] == "mcp_server_failed" and "'gone'" in n["text"] for n in res.notices)


def test_names_are_sanitised_and_capped_at_64() -> None:
    from zuno import limits
    from zuno.connect.mcp import tool_name

    assert tool_name("my server", "do.it/now") == "mcp_my_server_do_it_now"
    at_limit = tool_name("s", "t" * 58)
    assert at_limit == "mcp_s_" + "t" * 58 and len(at_limit) == limits.MCP_TOOL_NAME_MAX
    over = tool_name("s", "t" * 59)
    assert len(over) == limits.MCP_TOOL_NAME_MAX and over != tool_name("s", "t" * 60)


@pytest.mark.parametrize(("defer", "deferred"), [(0, True), (10_000_000, False), ("never", False), ("always", True)])
async def test_the_defer_threshold(workspace: Path, defer: Any, deferred: bool) -> None:
    cfg = _cfg()
    cfg["tool_search"] = {"defer": defer}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            visible = {t.name for t in s.visible_tools()}
    assert ("tool_search" in visible) is deferred
    assert ("mcp_bad_peek" in visible) is not deferred


async def test_mcp_connections_bounds_requests_in_flight(workspace: Path) -> None:
    cfg = _cfg(trusted=True, _extra={"concurrency": {"mcp_connections": 1}})
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            step = await s.step([{"name": "mcp_bad_slow", "arguments": {"ms": 400}} for _ in range(2)])
    a, b = step.results
    assert a.outcome is b.outcome is zuno.Outcome.ok
    # both were started by the dispatcher together; the one connection slot made them one after the other
    assert max(a.ended_at, b.ended_at) - min(a.started_at, b.started_at) >= 0.75


async def test_a_streamable_http_server_with_a_bearer_from_the_environment(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_peers import HttpZuno

    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "a.txt").write_text("served over http\n")
    monkeypatch.setenv("INNER_TOKEN", "inner-secret")
    async with HttpZuno(inner, "--token", "inner-secret") as z:
        cfg = {
            "mcp": {
                "inner": {"url": z.url, "bearer": "{env:INNER_TOKEN}", "allowed_tools": ["read"]},
                "off": {"command": str(workspace / "never-started"), "enabled": False},
            },
            "tool_search": {"defer": "never"},
        }
        async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
            async with rt.session() as s:
                names = sorted(n for n in rt.surface.tools if n.startswith("mcp_"))
                r = await _one(s, "mcp_inner_read", path="a.txt")
                failures = dict(rt.mcp.failures)
    assert "mcp_inner_read" in names and not [n for n in names if n.startswith("mcp_off_")]
    assert r.outcome is zuno.Outcome.ok and "served over http" in r.text
    assert failures == {}


async def test_a_server_that_sends_garbage_gives_a_typed_error_naming_it(workspace: Path) -> None:
    junk = str(Path(__file__).with_name("mcp_garbage_server.py"))
    cfg = {"mcp": {"junk": {"command": sys.executable, "args": [junk], "timeout_ms": 5000}}}
    cfg["tool_search"] = {"defer": "never"}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            r = await _one(s, "mcp_junk_mangle")
    assert r.outcome is zuno.Outcome.uncertain and "MCP server 'junk'" in r.text
    assert r.metadata["mcpError"]["server"] == "junk"
    assert r.ended_at - r.started_at < 10

"""Profiles, registered slots, the tools map (availability), an allowlist that replaces the
surface, and extension tools with the strict defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.config import ConfigError
from zuno.surface import PROFILE_DEFAULTS, PROFILE_SLOTS

EXT = str(Path(__file__).with_name("ext_tools.py"))


def test_the_default_surface_holds_only_built_tools_in_spec_order(workspace: Path) -> None:
    rt = zuno.Runtime(root=workspace)
    names = rt.surface.names()
    assert names[:2] == ["read", "write"] or names.index("read") < names.index("write")
    assert set(names) <= set(PROFILE_DEFAULTS["zuno"])
    assert [n for n in PROFILE_DEFAULTS["zuno"] if n in names] == names  # spec order
    for slot in PROFILE_SLOTS["zuno"]:
        assert slot not in names


def test_chord_profile_is_a_different_surface(workspace: Path) -> None:
    rt = zuno.Runtime(root=workspace, profile="chord")
    assert rt.surface.profile == "chord" and "bg" not in rt.surface.names()
    assert set(rt.surface.names()) <= set(PROFILE_DEFAULTS["chord"]) | set(PROFILE_SLOTS["chord"])


async def test_the_tools_map_disables_and_the_call_is_unavailable(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides={"tools": {"write": False}}) as rt, rt.session() as s:
        assert "write" not in rt.surface.names()
        (r,) = (await s.step([{"name": "write", "arguments": {"path": "a", "content": ""}}])).results
        assert (r.outcome, r.block_kind) == ("blocked", "unavailable")
        assert "tools.write = false" in r.text


async def test_an_allowlist_replaces_the_default_surface(workspace: Path) -> None:
    cfg: dict[str, Any] = {"agent": {"tools": ["read", "par_sleep"]}, "extensions": [EXT]}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        assert rt.surface.names() == ["read", "par_sleep"]
        (r,) = (await s.step([{"name": "write", "arguments": {"path": "a", "content": ""}}])).results
        assert r.block_kind == "unavailable" and "allowlist (agent.tools): add 'write' to it to offer it" in r.text


async def test_a_registered_slot_that_is_off_says_how_to_offer_it(workspace: Path) -> None:
    # Before: "a registered slot, not on the default surface", and nothing on how to switch it on.
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        (r,) = (await s.step([{"name": "task_context", "arguments": {"action": "get"}}])).results
        assert r.block_kind == "unavailable" and '"tools": {"task_context": true} offers it' in r.text


def test_unknown_names_in_tools_map_or_allowlist_are_config_errors(workspace: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent\.tools: 'reed'"):
        zuno.Runtime(root=workspace, config_overrides={"agent": {"tools": ["reed"]}})
    with pytest.raises(ConfigError, match=r"tools\.webfech"):
        zuno.Runtime(root=workspace, config_overrides={"tools": {"webfech": False}})
    with pytest.raises(ConfigError, match=r"unknown profile"):
        zuno.Runtime(root=workspace, profile="nope")


def test_extension_tools_get_the_strict_defaults_and_their_signature_as_schema(workspace: Path) -> None:
    rt = zuno.Runtime(root=workspace, config_overrides={"extensions": [EXT]})
    undeclared = rt.surface.tools["excl_sleep"]
    assert undeclared.declarations.as_dict() == {
        "effect": "SideEffecting",
        "replay": "Never",
        "concurrency": "Exclusive",
    }
    declared = rt.surface.tools["par_sleep"]
    assert declared.declarations.as_dict() == {"effect": "ReadOnly", "replay": "Safe", "concurrency": "ParallelSafe"}
    schema = declared.input_schema()
    assert schema["required"] == ["tag"] and schema["properties"]["ms"]["default"] == 50
    assert declared.description.startswith("Sleep ms milliseconds")


def test_bad_extensions_are_named(workspace: Path) -> None:
    (workspace / "empty.py").write_text("x = 1\n")
    (workspace / "broken.py").write_text("raise ValueError('nope')\n")
    (workspace / "shadow.py").write_text("import zuno\n@zuno.tool\ndef read(path: str) -> str:\n    return ''\n")
    for spec, msg in [
        ("empty.py", "declares no @zuno.tool"),
        ("broken.py", "failed to import: ValueError: nope"),
        ("missing.py", "is not a file"),
        ("shadow.py", "would shadow the built-in tool"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            zuno.Runtime(root=workspace, config_overrides={"extensions": [spec]})


def test_cli_tools_lists_schemas_and_declarations(workspace: Path, run_zuno: Any) -> None:
    out = json.loads(run_zuno("tools", "--json").stdout)
    by = {t["name"]: t for t in out["tools"]}
    assert by["read"]["declarations"]["effect"] == "ReadOnly"
    assert by["write"]["declarations"] == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
    assert by["read"]["inputSchema"]["properties"]["path"]["type"] == "string"
    assert by["bg"]["classifiedBy"] == "action"
    text = run_zuno("tools").stdout
    assert "read" in text and "ReadOnly" in text
    assert "by action:" in text and "cancel SideEffecting" in text

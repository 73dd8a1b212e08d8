"""Zuno as a client of real third-party MCP servers, run offline: the reference
``@modelcontextprotocol/server-everything`` and ``server-filesystem`` (npm) and ``mcp-server-git``
(PyPI, in its own venv). scripts/test installs them under .peers/; each test is skipped, saying
why, when its server is not there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import zuno

PEERS = Path(__file__).resolve().parents[1] / ".peers"
BIN = PEERS / "node" / "node_modules" / ".bin"
GIT_SERVER = PEERS / "git-venv" / "bin" / "mcp-server-git"


def need(path: Path, what: str) -> None:
    if not path.exists() or (path.suffix != ".py" and shutil.which("node") is None and "node" in str(path)):
        pytest.skip(f"{what} is not installed ({path}); scripts/test installs it")


async def _one(s: zuno.Session, name: str, **arguments: Any) -> zuno.CallRecord:
    return (await s.step([{"name": name, "arguments": arguments}])).results[0]


async def test_server_everything_untrusted_is_strict_and_its_content_is_kept(workspace: Path) -> None:
    need(BIN / "mcp-server-everything", "@modelcontextprotocol/server-everything")
    cfg = {"mcp": {"ev": {"command": str(BIN / "mcp-server-everything")}}, "tool_search": {"defer": "never"}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            echo_decl = rt.surface.tools["mcp_ev_echo"].declarations
            echo = await _one(s, "mcp_ev_echo", message="hi there")
            image = await _one(s, "mcp_ev_get-tiny-image")
            listed = await _one(s, "mcp_resource_list", server="ev")
            first = listed.metadata["resources"][0]["uri"]
            read = await _one(s, "mcp_resource_read", server="ev", uri=first)
            bad = await _one(s, "mcp_ev_get-sum", a="one")
    # it claims readOnlyHint, but it is not trusted
    assert echo_decl == zuno.Declarations()
    assert echo.outcome is zuno.Outcome.ok and "hi there" in echo.text
    kinds = [c["type"] for c in image.metadata["mcp"]["content"]]
    assert "image" in kinds
    assert read.outcome is zuno.Outcome.ok and read.metadata["mcp"]["content"]
    assert bad.outcome is zuno.Outcome.blocked and bad.block_kind is zuno.BlockKind.invalid_arguments


async def test_server_filesystem_trusted_reads_overlap_and_writes_are_exclusive(workspace: Path) -> None:
    need(BIN / "mcp-server-filesystem", "@modelcontextprotocol/server-filesystem")
    (workspace / "a").write_text("alpha\n")
    cfg = {
        "mcp": {"fs": {"command": str(BIN / "mcp-server-filesystem"), "args": [str(workspace)], "trusted": True}},
        "tool_search": {"defer": "never"},
    }
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            decl = {n: rt.surface.tools[n].declarations for n in ("mcp_fs_read_text_file", "mcp_fs_write_file")}
            wrote = await _one(s, "mcp_fs_write_file", path=str(workspace / "b"), content="beta\n")
            reads = [{"name": "mcp_fs_read_text_file", "arguments": {"path": str(workspace / p)}} for p in "ab"]
            both = await s.step(reads)
    assert decl["mcp_fs_read_text_file"] == zuno.Declarations("ReadOnly", "Safe", "ParallelSafe")
    assert decl["mcp_fs_write_file"].concurrency is zuno.Concurrency.Exclusive
    assert wrote.outcome is zuno.Outcome.ok and (workspace / "b").read_text() == "beta\n"
    assert [r.outcome for r in both.results] == [zuno.Outcome.ok, zuno.Outcome.ok]
    assert "alpha" in both.results[0].text and "beta" in both.results[1].text


async def test_mcp_server_git_in_its_own_venv(workspace: Path) -> None:
    need(GIT_SERVER, "mcp-server-git")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)  # noqa: ASYNC221 (setup, before the runtime)
    (workspace / "f.txt").write_text("x\n")
    cfg = {
        "mcp": {
            "git": {
                "command": str(GIT_SERVER),
                "args": ["--repository", str(workspace)],
                "allowed_tools": ["git_status"],
                "declarations": {"git_status": {"effect": "ReadOnly"}},
            }
        },
        "tool_search": {"defer": "never"},
    }
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt:
        async with rt.session() as s:
            names = sorted(n for n in rt.surface.tools if n.startswith("mcp_git_"))
            status = await _one(s, "mcp_git_git_status", repo_path=str(workspace))
            decl = rt.surface.tools["mcp_git_git_status"].declarations
    assert names == ["mcp_git_git_status"]
    assert decl.effect is zuno.Effect.ReadOnly and decl.concurrency is zuno.Concurrency.Exclusive
    assert status.outcome is zuno.Outcome.ok and "f.txt" in status.text

"""report_write: host-chosen immutable report files, refused names, read-only agents."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits
from zuno.tools.reports import name_problem

from conftest import batch


async def _call(root: Path, calls: list[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, **kw) as rt, rt.session() as s:
        res = await s.step(calls)
        return [r.to_json() for r in res.results]


def test_publishes_a_new_file_per_call_with_path_bytes_and_sha(run_zuno: Any, workspace: Path) -> None:
    content = "# Audit\nnaïve findings ✅\n"
    call = {"name": "report_write", "arguments": {"name": "audit.md", "content": content}}
    out = batch(run_zuno, [call, call])
    a, b = out["results"]
    assert a["outcome"] == b["outcome"] == "ok"
    ra, rb = a["metadata"]["reportArtifact"], b["metadata"]["reportArtifact"]
    assert ra["path"] != rb["path"]  # a new call publishes a new file
    for r in (ra, rb):
        assert r["path"].startswith(".zuno/reports/audit-") and r["path"].endswith(".md")
        data = (workspace / r["path"]).read_bytes()
        assert data == content.encode()
        assert r["bytes"] == len(data) and r["sha256"] == hashlib.sha256(data).hexdigest()
        assert r["path"] in a["text"] + b["text"]
    assert a["declarations"] == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
    # The receipt is durable: a later process sees it on the call record.
    events = run_zuno("events", "--session", out["session"], "--json")
    assert events.returncode == 0
    # Reports stay out of Git: the state folder ignores everything in it.
    assert (workspace / ".zuno/.gitignore").read_text().strip().endswith("*")


async def test_the_receipt_is_on_the_durable_record(workspace: Path) -> None:
    (r,) = await _call(workspace, [{"name": "report_write", "arguments": {"name": "r.txt", "content": "x"}}])
    async with zuno.Runtime(root=workspace) as rt:
        rows = rt.store.calls(rt.store.query("SELECT id FROM sessions")[0]["id"])
        assert rows[0].metadata["reportArtifact"] == r["metadata"]["reportArtifact"]
        assert rt.store.artifact(r["metadata"]["reportArtifact"]["path"])["kind"] == "report"


async def test_usable_by_a_read_only_agent(workspace: Path) -> None:
    (r,) = await _call(
        workspace,
        [{"name": "report_write", "arguments": {"name": "findings.md", "content": "ok"}}],
        config_overrides={"agent": {"tools": ["read", "grep", "glob", "report_write"]}},
    )
    assert r["outcome"] == "ok", r["text"]


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../x.md",
        "a/b.md",
        "a\\b.md",
        "..hidden",
        "CON",
        "con.txt",
        "Nul.md",
        "COM1.log",
        "lpt9",
        "report.",
        "report ",
        " report",
        "bad\x00name",
        "tab\tname",
        "new\nline",
        "del\x7f",
        "a:b",
        "what?.md",
        "star*.md",
        'quote".md',
        "pipe|x",
        "<x>",
        "x" * (limits.REPORT_NAME_MAX_BYTES + 1),
        "e\u0301.md",  # not NFC
    ],
)
async def test_unsafe_names_are_refused(workspace: Path, name: str) -> None:
    assert name_problem(name) is not None
    (r,) = await _call(workspace, [{"name": "report_write", "arguments": {"name": name, "content": "x"}}])
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
    assert not (workspace / ".zuno/reports").exists() or not any((workspace / ".zuno/reports").iterdir())


@pytest.mark.parametrize("name", ["audit.md", "report", "Überblick.txt", "a.b.c", "CONSOLE.md", "com10.txt"])
def test_ordinary_names_are_accepted(name: str) -> None:
    assert name_problem(name) is None


async def test_content_limit_is_1_mib(workspace: Path) -> None:
    ok = "x" * limits.REPORT_MAX_BYTES
    over = ok + "y"
    r1, r2 = await _call(
        workspace,
        [
            {"name": "report_write", "arguments": {"name": "big.txt", "content": ok}},
            {"name": "report_write", "arguments": {"name": "big.txt", "content": over}},
        ],
    )
    assert r1["outcome"] == "ok" and r1["metadata"]["reportArtifact"]["bytes"] == 1 << 20
    assert (r2["outcome"], r2["block_kind"]) == ("blocked", "invalid_arguments")
    assert "1048577 bytes" in r2["text"]


async def test_symlinked_reports_folder_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".zuno").mkdir()
    os.symlink(elsewhere, workspace / ".zuno/reports")
    (r,) = await _call(workspace, [{"name": "report_write", "arguments": {"name": "a.md", "content": "x"}}])
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    assert list(elsewhere.iterdir()) == []


async def test_symlinked_state_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    real = tmp_path / "real-state"
    real.mkdir()
    os.symlink(real, root / ".zuno")
    (r,) = await _call(
        root,
        [{"name": "report_write", "arguments": {"name": "a.md", "content": "x"}}],
        db=tmp_path / "z.db",
    )
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    assert not (real / "reports").exists()


def test_report_write_is_listed_with_its_declarations(run_zuno: Any) -> None:
    proc = run_zuno("tools", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "report_write" in json.dumps(json.loads(proc.stdout))

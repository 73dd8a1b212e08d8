"""Receipts are durable and retrievable (CLI and API); the receipt line stays visible when the body
is withheld; exact bytes are saved; the argument model refuses what it does not do."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import zuno
from zuno.tools.shell import receipt as fetch_receipt

from conftest import RunZuno, batch


async def run_shell(root: Path, arguments: dict[str, Any], config: dict[str, Any] | None = None) -> zuno.CallRecord:
    async with zuno.Runtime(root=root, config_overrides=config or {}) as rt, rt.session() as s:
        res = await s.step([{"name": "shell", "arguments": arguments}])
        return res.results[0]


def test_receipt_is_durable_and_retrievable(run_zuno: RunZuno, workspace: Path) -> None:
    out = batch(run_zuno, [{"name": "shell", "arguments": {"command": "echo hi; false | cat"}}])
    rec = out["results"][0]
    rid = rec["metadata"]["receiptId"]
    assert rid.startswith("rcp_")
    assert rec["text"].splitlines()[-1] == f"[verification {rid}]"
    proc = run_zuno("receipt", rid, "--json")
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout)
    assert stored == rec["metadata"]["receipt"]
    assert stored["exitCode"] == 1 and stored["authority"] == "authoritative" and stored["decision"] == "failed"
    assert stored["command"] == "echo hi; false | cat" and stored["session"] == out["session"]
    text = run_zuno("receipt", rid)
    assert text.returncode == 0
    assert f"verification {rid}" in text.stdout and "authority:  authoritative" in text.stdout
    missing = run_zuno("receipt", "rcp_0000")
    assert missing.returncode == 2 and "no verification receipt" in missing.stderr
    bad = run_zuno("receipt", "nope")
    assert bad.returncode == 2


async def test_receipt_api(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "shell", "arguments": {"command": "true || true"}}])
        rid = res.results[0].metadata["receiptId"]
        r = rt.receipt(rid)
        assert r is not None and r["authority"] == "derived"
        assert r["limitations"][0]["construct"] == "or-fallback"
        assert fetch_receipt(rt, rid) == r
        assert rt.receipt("rcp_missing") is None


async def test_withheld_body_keeps_the_receipt_visible(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "seq 1 3000"})
    assert rec.text.startswith("[output withheld:")
    assert "tool_output.max_lines = 2000" in rec.text
    assert "[exit 0 · passed · authoritative (pipefail, bash)]" in rec.text
    assert rec.text.splitlines()[-1] == f"[verification {rec.metadata['receiptId']}]"
    saved = workspace / rec.metadata["withheldOutput"]["outputPath"]
    assert saved.read_bytes() == "".join(f"{i}\n" for i in range(1, 3001)).encode()


async def test_exact_bytes_are_saved_not_a_decoded_copy(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "for i in $(seq 1 30000); do printf '\\377\\376'; done"})
    saved = workspace / rec.metadata["withheldOutput"]["outputPath"]
    assert saved.read_bytes() == b"\xff\xfe" * 30000


async def test_large_output_is_withheld_from_the_capture_log(workspace: Path) -> None:
    n = 9 * 1024 * 1024  # over SHELL_INLINE_READ_MAX_BYTES: never read into memory
    rec = await run_shell(workspace, {"command": f"head -c {n} /dev/urandom | tee big.bin"})
    w = rec.metadata["withheldOutput"]
    assert w["bytes"] == n
    data = (workspace / "big.bin").read_bytes()
    assert w["sha256"] == hashlib.sha256(data).hexdigest()
    assert (workspace / w["outputPath"]).read_bytes() == data
    assert rec.metadata["writtenPaths"] == ["big.bin"]


async def test_no_output_says_so(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "true"})
    assert rec.text.splitlines()[0] == "(no output)"


async def test_workdir(workspace: Path, tmp_path: Path) -> None:
    (workspace / "sub").mkdir()
    rec = await run_shell(workspace, {"command": "pwd", "workdir": "sub"})
    assert rec.text.splitlines()[0] == str(workspace / "sub")
    rec = await run_shell(workspace, {"command": "pwd", "workdir": str(tmp_path)})
    assert rec.outcome == "blocked" and rec.block_kind == "denied" and "workdir" in rec.text
    rec = await run_shell(workspace, {"command": "pwd", "workdir": "missing"})
    assert rec.outcome == "blocked" and rec.block_kind == "invalid_arguments"


async def test_arguments_that_do_nothing_are_refused(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "true", "exitPolicy": "sometimes"})
    assert rec.outcome == "blocked" and "exitPolicy" in rec.text
    rec = await run_shell(workspace, {"command": ""})
    assert rec.outcome == "blocked" and "command" in rec.text


def test_declarations_on_both_profiles(run_zuno: RunZuno) -> None:
    for profile in ("zuno", "chord"):
        proc = run_zuno("tools", "--json", "--profile", profile)
        assert proc.returncode == 0, proc.stderr
        shell = next(t for t in json.loads(proc.stdout)["tools"] if t["name"] == "shell")
        assert shell["declarations"] == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
        props = shell["inputSchema"]["properties"]
        assert {"command", "exitPolicy", "workdir", "timeout_ms", "interpreter"} <= set(props)
        assert shell["inputSchema"]["required"] == ["command"]

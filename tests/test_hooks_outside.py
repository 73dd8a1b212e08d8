"""Pre-dispatch hooks as real hooks behave: one that starts a process which keeps its pipes open
(the verdict is taken when the hook exits, what it left is stopped), one that floods its output
(bounded, the rest read away), one whose answer cannot be read (refused: hooks fail closed), one
that never reads the call it is given."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import zuno
from zuno import limits


def _hook(tmp: Path, name: str, body: str, timeout_ms: int = 5000) -> dict[str, Any]:
    script = tmp / f"{name}.py"
    script.write_text(body)
    return {"hooks": {"pre_dispatch": [{"command": [sys.executable, str(script)], "timeout_ms": timeout_ms}]}}


async def _one(workspace: Path, cfg: dict[str, Any], call: dict[str, Any]) -> Any:
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        return (await s.step([call])).results[0]


ECHO = {"name": "shell", "arguments": {"command": "echo ran"}}


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # killed; reaped by whoever its parent is now


async def test_a_hook_that_leaves_a_process_holding_its_pipes_is_answered_when_it_exits(
    workspace: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    body = (
        "import subprocess, sys\n"
        "sys.stdin.read()\n"
        "child = subprocess.Popen(['sleep', '300'])\n"  # inherits stdout and stderr
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        'print(\'{"decision": "allow"}\')\n'
    )
    r = await _one(workspace, _hook(tmp_path, "daemon", body), ECHO)
    assert r.outcome == "ok" and "ran" in r.text, r.text  # not "did not answer within 5000 ms"
    assert _gone(int(pidfile.read_text()))  # what the hook left behind did not outlive it
    deny = body.replace('"allow"', '"deny", "reason": "not now"')
    r = await _one(workspace, _hook(tmp_path, "daemon_deny", deny), ECHO)
    assert (r.outcome, r.block_kind) == ("blocked", "denied") and "not now" in r.text, r.text


async def test_a_flood_of_output_is_bounded_and_its_size_said(workspace: Path, tmp_path: Path) -> None:
    flood = "import sys\nsys.stdout.write('x' * 20_000_000)\n"
    r = await _one(workspace, _hook(tmp_path, "flood", flood), ECHO)
    assert r.outcome == "ok", r.text  # exit 0 and no deny object: allowed
    loud = "import sys\nsys.stderr.write('e' * 1_000_000)\nsys.exit(3)\n"
    r = await _one(workspace, _hook(tmp_path, "loud", loud), ECHO)
    assert (r.outcome, r.block_kind) == ("blocked", "denied")
    assert f"the hook wrote 1000000 bytes; the first {limits.HOOK_OUTPUT_MAX_BYTES} are shown" in r.text
    assert len(r.text) < limits.HOOK_OUTPUT_MAX_BYTES + 1000


async def test_an_answer_that_cannot_be_read_refuses_the_call(workspace: Path, tmp_path: Path) -> None:
    long_deny = "import json\nprint(json.dumps({'decision': 'deny', 'reason': 'r' * 100_000}))\n"
    r = await _one(workspace, _hook(tmp_path, "long", long_deny), ECHO)
    assert (r.outcome, r.block_kind) == ("blocked", "denied"), r.text
    assert f"over the {limits.HOOK_OUTPUT_MAX_BYTES} a hook's answer may hold" in r.text
    broken = 'print(\'{"decision": "deny", reason: unquoted}\')\n'
    r = await _one(workspace, _hook(tmp_path, "broken", broken), ECHO)
    assert (r.outcome, r.block_kind) == ("blocked", "denied"), r.text
    assert "not valid JSON" in r.text and '{"decision": "deny"' in r.text


async def test_a_hook_that_never_reads_a_large_call_decides_by_its_exit(workspace: Path, tmp_path: Path) -> None:
    big = {"name": "write", "arguments": {"path": "big.txt", "content": "a" * 3_000_000}}
    r = await _one(workspace, _hook(tmp_path, "deaf", "import sys\nsys.exit(0)\n"), big)
    assert r.outcome == "ok", r.text[:300]
    r = await _one(
        workspace, _hook(tmp_path, "deaf_no", "import sys\nprint('no', file=sys.stderr)\nsys.exit(1)\n"), big
    )
    assert (r.outcome, r.block_kind) == ("blocked", "denied") and "no." in r.text

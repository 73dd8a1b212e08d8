"""The exit-status table (docs/cli.md), row by row, with real signals sent to real zuno processes:
0 ok; 1 ran but not ok; 2 usage or configuration error; 130 SIGINT; 143 SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import zuno_env


def _popen(workspace: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "zuno", *argv],
        cwd=workspace,
        env=zuno_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until(cond: Any, proc: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"zuno ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _handles_sigterm(pid: int) -> bool:
    """zuno's main() has installed its SIGTERM handler (it is running, past interpreter start)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_rows_0_1_2(workspace: Path, run_zuno: Any) -> None:
    (workspace / "a.txt").write_text("a\n")
    rows = [
        (("call", "read", '{"path": "a.txt"}'), None, 0),
        (("call", "shell", '{"command": "true"}'), None, 0),
        (("call", "read", '{"path": "missing.txt"}'), None, 1),  # error
        (("call", "no_such_tool"), None, 1),  # blocked
        (("call", "read", '{"path": "a.txt", "limit": true}'), None, 1),  # blocked: invalid_arguments
        (("call", "shell", '{"command": "exit 7"}'), None, 1),  # the command failed: outcome error
        (("batch", "-"), json.dumps([{"name": "read", "arguments": {"path": "a.txt"}}] * 2), 0),
        (("batch", "-"), json.dumps([{"name": "read", "arguments": {"path": "a.txt"}}, {"name": "nope"}]), 1),
        (("batch", "-"), "[]", 0),
        (("steps", "-"), json.dumps([{"name": "read", "arguments": {"path": "a.txt"}}]) + "\n", 0),
        (("steps", "-"), json.dumps([{"name": "read", "arguments": {"path": "missing.txt"}}]) + "\n", 1),
        (("tools",), None, 0),
        (("sessions",), None, 0),
        (("version", "--json"), None, 0),
        (("--version",), None, 0),
        (("call",), None, 2),  # argparse usage
        (("batch", "-"), "{", 2),
        (("tools", "--profile", "nope"), None, 2),
    ]
    for argv, stdin, status in rows:
        proc = run_zuno(*argv, input=stdin)
        assert proc.returncode == status, (argv, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr
    shell7 = json.loads(run_zuno("call", "shell", '{"command": "exit 7"}', "--json").stdout)
    assert shell7["outcome"] == "error" and shell7["metadata"]["exitCode"] == 7


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_call_cancels_it_settles_it_and_exits_with_its_status(
    workspace: Path, sig: signal.Signals, status: int
) -> None:
    proc = _popen(workspace, "call", "shell", json.dumps({"command": "touch started; sleep 60"}), "--json")
    try:
        _wait_until((workspace / "started").exists, proc, "the command to start")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, err
    assert "Traceback" not in err
    rec = json.loads(out)  # the record was still printed: the call settled
    assert rec["cancelled"] is True and rec["outcome"] == "uncertain"


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("command", ["batch", "steps"])
def test_a_signal_while_waiting_for_input_exits_with_its_status(
    workspace: Path, sig: signal.Signals, status: int, command: str
) -> None:
    proc = _popen(workspace, command, "-")
    try:
        _wait_until(lambda: _handles_sigterm(proc.pid), proc, "zuno to be running")
        time.sleep(0.3)  # let it reach the read of its input
        proc.send_signal(sig)
        proc.wait(60)  # the input stays open: the signal alone ends the command
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, err
    assert "Traceback" not in err and out == ""


def test_sigterm_during_a_steps_step_settles_it_and_exits_143(workspace: Path) -> None:
    proc = _popen(workspace, "steps", "-")
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps([{"name": "shell", "arguments": {"command": "touch started; sleep 60"}}]) + "\n")
        proc.stdin.flush()
        _wait_until((workspace / "started").exists, proc, "the command to start")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    (line,) = out.splitlines()
    (rec,) = json.loads(line)["results"]
    assert rec["cancelled"] is True and "Traceback" not in err

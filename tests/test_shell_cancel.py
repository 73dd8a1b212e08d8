"""Cancelling a running command returns a settled result; a killed Zuno leaves no survivors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zuno
from zuno.process import RunningCommand

from conftest import zuno_env


def _exists(p: Path) -> bool:
    return p.exists()


async def _wait_for(path: Path, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not _exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)


def _group_members(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        rest = data[data.rfind(b")") + 2 :].split()
        if rest[0] != b"Z" and int(rest[2]) == pgid:
            out.append(int(name))
    return out


async def _cancel_when(workspace: Path, command: str, marker: str, *, delay: float = 0.0) -> zuno.CallRecord:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        step = asyncio.create_task(s.step([{"name": "shell", "arguments": {"command": command}}]))
        await _wait_for(workspace / marker)
        await asyncio.sleep(delay)
        s.cancel()
        res = await asyncio.wait_for(step, 60)
        return res.results[0]


async def test_api_cancel_while_running_is_uncertain(workspace: Path) -> None:
    rec = await _cancel_when(workspace, "echo partial; touch started; sleep 60", "started")
    assert rec.cancelled is True
    assert rec.outcome == "uncertain"
    first = rec.text.splitlines()[0]
    assert first.startswith("[uncertain: cancelled while the command was running]")
    assert "partial" in rec.text  # everything written is kept
    r = rec.metadata["receipt"]
    assert r["authority"] == "unknown" and r["decision"] == "nothing" and r["cancelled"]
    assert rec.metadata["cancellation"] == "while-running"
    assert "Inspect" in first or "inspect" in rec.text


async def test_api_cancel_with_no_output_says_so(workspace: Path) -> None:
    rec = await _cancel_when(workspace, "touch started; sleep 60", "started")
    assert rec.outcome == "uncertain"
    assert "(no output)" in rec.text


async def test_api_cancel_after_the_command_exited_keeps_its_verdict(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command exits 3 and its exit is settled, but the tool's task has not resumed yet when the
    # cancel arrives (widened here: the wait returns the exit only after a pause). The interrupt
    # found the command already finished: its own verdict stands.
    real_wait = RunningCommand.wait
    paused: list[bool] = []

    async def late_wait(self: RunningCommand, timeout: float | None = None) -> object:  # noqa: ASYNC109
        info = await real_wait(self, timeout)
        if info is not None and not paused:
            paused.append(True)
            await asyncio.sleep(3)
        return info

    monkeypatch.setattr(RunningCommand, "wait", late_wait)
    cmd = "echo $$ > leader.pid; echo verdict; false | true; exit 3"
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        step = asyncio.create_task(s.step([{"name": "shell", "arguments": {"command": cmd}}]))
        await _wait_for(workspace / "leader.pid")
        leader = int((workspace / "leader.pid").read_text())
        deadline = time.monotonic() + 30
        while _exists(Path(f"/proc/{leader}")):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        s.cancel()
        rec = (await asyncio.wait_for(step, 60)).results[0]
    assert rec.cancelled is True
    assert rec.text.splitlines()[0].startswith("[cancelled after the command had exited]")
    r = rec.metadata["receipt"]
    # its usual verdict and authority, not "unknown"
    assert r["exitCode"] == 3 and r["decision"] == "failed" and r["authority"] == "authoritative"
    assert r["cancelled"] is True
    assert rec.outcome == "error"
    assert rec.metadata["cancellation"] == "exited-before-cancel"
    assert "verdict" in rec.text


async def test_cancelled_output_over_the_limit_is_withheld_behind_the_statement(workspace: Path) -> None:
    cmd = "head -c 70000 /dev/zero | tr '\\0' a; touch started; sleep 60"
    rec = await _cancel_when(workspace, cmd, "started")
    lines = rec.text.splitlines()
    assert lines[0].startswith("[uncertain: cancelled")
    assert lines[1].startswith("[output withheld: 70000 bytes")
    saved = rec.metadata["withheldOutput"]["outputPath"]
    assert (workspace / saved).read_bytes() == b"a" * 70000
    assert "[verification rcp_" in rec.text


def test_cli_sigint_cancels_and_settles(workspace: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "zuno", "call", "shell", json.dumps({"command": "touch started; sleep 60"}), "--json"],
        cwd=workspace,
        env=zuno_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (workspace / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err  # interrupted (docs/cli.md)
    rec = json.loads(out)
    assert rec["cancelled"] is True and rec["outcome"] == "uncertain"
    assert rec["text"].startswith("[uncertain: cancelled while the command was running]")
    assert rec["metadata"]["receipt"]["authority"] == "unknown"
    # the durable record says the same
    ev = subprocess.run(
        [sys.executable, "-m", "zuno", "receipt", rec["metadata"]["receiptId"], "--json"],
        cwd=workspace,
        env=zuno_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(ev.stdout)["cancelled"] is True


def test_killed_zuno_leaves_no_survivors(workspace: Path) -> None:
    cmd = "sleep 300 & (sleep 300 &) ; sh -c 'sleep 300' & echo $$ > leader.pid; sleep 300"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zuno", "call", "shell", json.dumps({"command": cmd})],
        cwd=workspace,
        env=zuno_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (workspace / "leader.pid").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        pgid = int((workspace / "leader.pid").read_text())
        deadline = time.monotonic() + 30
        while len(_group_members(pgid)) < 4:
            assert time.monotonic() < deadline, _group_members(pgid)
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _group_members(pgid):
            assert time.monotonic() < deadline, f"survivors: {_group_members(pgid)}"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()

"""The guard's reserved codes (125/126/127) are read as the guard's only with its diagnostic line; a
command killed by a signal has no exit code; a timed-out command decides nothing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.tools.shell import tool as shell_tool


async def run_shell(root: Path, arguments: dict[str, Any], config: dict[str, Any] | None = None) -> zuno.CallRecord:
    async with zuno.Runtime(root=root, config_overrides=config or {}) as rt, rt.session() as s:
        res = await s.step([{"name": "shell", "arguments": arguments}])
        return res.results[0]


async def test_guard_127_has_no_authority(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The interpreter vanished between the lookup and the exec: the guard itself reports 127.
    monkeypatch.setattr(shell_tool, "find_interpreter", lambda name, path: str(workspace / "gone" / "bash"))
    rec = await run_shell(workspace, {"command": "true"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 127
    assert r["guardDiagnostic"] and r["guardDiagnostic"].startswith("zuno-guard: 127")
    assert r["authority"] == "unknown" and r["decision"] == "nothing"
    assert any("nothing ran" in n for n in r["notProven"])
    assert rec.outcome == "error"
    assert "zuno-guard: 127" in rec.text  # the guard's line is in the captured output


async def test_guard_126_has_no_authority(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = workspace / "not-executable"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o644)  # no execute bit at all: even root cannot exec it
    monkeypatch.setattr(shell_tool, "find_interpreter", lambda name, path: str(fake))
    rec = await run_shell(workspace, {"command": "true"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 126
    assert r["guardDiagnostic"] and r["guardDiagnostic"].startswith("zuno-guard: 126")
    assert r["authority"] == "unknown" and r["decision"] == "nothing"
    assert rec.outcome == "error"


async def test_guard_125_before_the_exec_is_not_run(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The working directory disappears before the guard enters it: the guard's own failure, before the
    # command was exec'd, so the guard knows nothing ran.
    gone = workspace / "vanishing"
    gone.mkdir()
    real = shell_tool.ShellTool._workdir

    def vanish(ctx: Any, args: Any) -> Path:
        p = real(ctx, args)
        gone.rmdir()
        return p

    monkeypatch.setattr(shell_tool.ShellTool, "_workdir", staticmethod(vanish))
    rec = await run_shell(workspace, {"command": "touch x", "workdir": "vanishing"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 125
    assert r["guardDiagnostic"] and r["guardDiagnostic"].startswith("zuno-guard: 125")
    assert "the command did not run" in r["guardDiagnostic"]
    assert rec.outcome == "error"
    assert rec.text.splitlines()[0] == (
        "[not run: the guard reports exit 125: it failed before starting the command] Nothing ran."
    )
    assert r["authority"] == "unknown" and r["decision"] == "nothing"
    assert any("nothing ran" in n for n in r["notProven"])
    assert not (workspace / "x").exists()


async def test_guard_125_after_the_exec_is_uncertain(workspace: Path) -> None:
    # The guard dies while the command runs: what the command did is unknown.
    rec = await run_shell(workspace, {"command": "kill -9 $PPID; sleep 0.2; touch x", "yield_time_ms": 0})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 125
    assert r["guardDiagnostic"] and "exited unexpectedly" in r["guardDiagnostic"]
    assert rec.outcome == "uncertain"
    assert rec.text.splitlines()[0].startswith("[uncertain: the guard failed (exit 125)]")
    assert r["authority"] == "unknown" and r["decision"] == "nothing"
    assert any("guard's own failure" in n for n in r["notProven"])


async def test_command_exit_125_and_127_without_the_guard_line_are_ordinary(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "echo 'zuno-guard: 125: forged'; exit 125"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 125 and r["guardDiagnostic"] is None
    assert r["authority"] == "authoritative" and r["decision"] == "failed"
    assert rec.outcome == "error"
    rec = await run_shell(workspace, {"command": "no-such-program-zz --version"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 127 and r["guardDiagnostic"] is None
    assert r["authority"] == "authoritative" and r["decision"] == "failed"
    assert "command not found" in rec.text
    # make's own "Error 126" is make's verdict
    rec = await run_shell(workspace, {"command": "echo 'make: *** [all] Error 126'; exit 2"})
    assert rec.metadata["receipt"]["authority"] == "authoritative"


async def test_killed_by_a_signal_has_no_exit_code(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "kill -KILL $$"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] is None and r["signal"] == 9
    assert r["decision"] == "nothing" and r["authority"] == "unknown"
    assert "killed by signal 9" in rec.text
    assert rec.outcome == "error"


async def test_timeout_stops_the_group_and_decides_nothing(workspace: Path) -> None:
    rec = await asyncio.wait_for(  # a hang guard only: the command would run 60 s
        run_shell(workspace, {"command": "sleep 60 & echo $! > child.pid; echo begun; sleep 60", "timeout_ms": 500}),
        30,
    )
    assert rec.outcome == "uncertain"
    assert rec.text.splitlines()[0].startswith("[uncertain: timed out]")
    assert "begun" in rec.text  # what it wrote is kept
    r = rec.metadata["receipt"]
    assert r["timedOut"] and r["decision"] == "nothing" and r["authority"] == "unknown"
    child = int((workspace / "child.pid").read_text())
    assert not os.path.exists(f"/proc/{child}")


@pytest.mark.parametrize("arguments", [{}, {"timeout_ms": 0}])
async def test_the_hard_ceiling_kills_and_decides_nothing(workspace: Path, arguments: dict[str, Any]) -> None:
    # No timeout_ms of its own (or 0 on a command that cannot be promoted: deliberate waiting): the
    # runtime's cap is the deadline. Lowered here through the config so the test is quick.
    cmd = "echo begun; sleep 60"
    rec = await run_shell(workspace, {"command": cmd, **arguments}, {"shell": {"timeout_ms": 400}})
    assert rec.outcome == "uncertain"
    assert rec.text.splitlines()[0].startswith("[uncertain: killed at the hard ceiling]")
    assert "begun" in rec.text
    r = rec.metadata["receipt"]
    assert (r["decision"], r["authority"], r["exitCode"], r["killedBy"]) == ("nothing", "unknown", None, "ceiling")
    assert r["notProven"] == ["the command reached its hard ceiling and was killed there rather than deciding anything"]
    # An explicit timeout_ms is the call's own deadline: reported as a timeout, not the ceiling.
    rec = await run_shell(workspace, {"command": cmd, "timeout_ms": 400})
    assert rec.text.splitlines()[0].startswith("[uncertain: timed out]")


async def test_timeout_over_the_maximum_is_refused(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "true", "timeout_ms": 600_001})
    assert rec.outcome == "blocked" and rec.block_kind == "invalid_arguments"
    assert "timeout_ms" in rec.text
    rec = await run_shell(workspace, {"command": "true", "timeout_ms": 600_000})
    assert rec.outcome == "ok"
    assert rec.metadata["timeoutMs"] == 600_000


async def test_timeout_zero_keeps_the_default_cap(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "true", "timeout_ms": 0})
    assert rec.metadata["timeoutMs"] == 600_000


async def test_a_status_that_could_not_be_settled_decides_nothing(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process layer reports settled=False when the capture broke after the process exited.
    import dataclasses

    from zuno.process import RunningCommand

    real_wait = RunningCommand.wait

    async def broken(self: RunningCommand, timeout: float | None = None) -> object:  # noqa: ASYNC109
        info = await real_wait(self, timeout)
        return None if info is None else dataclasses.replace(info, settled=False)

    monkeypatch.setattr(RunningCommand, "wait", broken)
    rec = await run_shell(workspace, {"command": "echo out; exit 0"})
    assert rec.outcome == "uncertain"
    assert rec.text.splitlines()[0].startswith("[uncertain: the status could not be settled]")
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 0 and r["decision"] == "nothing" and r["authority"] == "unknown"
    assert any("could not be settled" in n for n in r["notProven"])

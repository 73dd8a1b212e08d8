"""Shared helpers for the background-job tests: start jobs the way the shell tool does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from zuno.jobs import Job, JobManager
from zuno.process import CommandSpec, procfs

from conftest import zuno_env

EXTENSION = '''
import os
import zuno
from zuno.jobs import JobManager
from zuno.process import CommandSpec


@zuno.tool(effect="SideEffecting")
async def bgstart(ctx: zuno.ToolContext, script: str, timeout_s: float = 0, purpose: str = "") -> zuno.ToolOutput:
    """Start a bash script as a background job (what shell run_in_background does)."""
    jm = JobManager.of(ctx)
    spec = CommandSpec(["bash", "-c", script], ctx.workspace.root, dict(os.environ), jm.log_dir, label="bgstart")
    job = await jm.start(spec, label=script[:60], command=script, deadline_s=timeout_s or None,
                         purpose=purpose or None, call_seq=ctx.call_seq)
    return job.started_output()
'''


def install_extension(workspace: Path, profile: str | None = None) -> None:
    (workspace / "bgstart.py").write_text(EXTENSION)
    cfg: dict[str, Any] = {"extensions": ["bgstart.py"]}
    if profile:
        cfg["profile"] = profile
    (workspace / "zuno.json").write_text(json.dumps(cfg))


async def start_job(session: Any, script: str, **kw: Any) -> Job:
    jm = JobManager.for_session(session)
    root = session.runtime.workspace.root
    spec = CommandSpec(["bash", "-c", script], root, dict(os.environ), jm.log_dir, label="test")
    return await jm.start(spec, label=script[:60], command=script, **kw)


def alive(pid: int) -> bool:
    st = procfs.stat(pid)
    return st is not None and st[2] != "Z"


def wait_pids(path: Path, n: int, timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(p) for p in path.read_text().split()]
            if len(pids) >= n:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"only {path.read_text() if path.exists() else ''!r} after {timeout}s")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


class Steps:
    """An interactive `zuno steps -` process: send one step, read its one line back."""

    def __init__(self, workspace: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zuno", "steps", "-", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=workspace,
            env=zuno_env(),
        )

    def step(self, *calls: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(list(calls)) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else ""
        return json.loads(line)

    def one(self, name: str, **arguments: Any) -> dict[str, Any]:
        return self.step(call(name, **arguments))["results"][0]

    def close(self, timeout: float = 120) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        rc = self.proc.wait(timeout)
        return rc

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

"""On a terminal the CLI asks for approval; the answer decides the call."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

from conftest import zuno_env


def _run_in_pty(workspace: Path, answer: bytes, path: str) -> tuple[str, int]:
    env = zuno_env({"ZUNO_CONFIG_CONTENT": json.dumps({"permission": {"strict": True}})})
    pid, fd = pty.fork()
    if pid == 0:  # the child: zuno with the pty as its controlling terminal
        os.chdir(workspace)
        call = json.dumps({"path": path, "content": "approved\n"})
        os.execve(sys.executable, [sys.executable, "-m", "zuno", "call", "write", call], env)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(fd, answer + b"\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return re.sub(r"\r", "", seen.decode(errors="replace")), os.waitstatus_to_exitcode(status)


def test_the_terminal_is_asked_and_yes_runs_the_call(workspace: Path) -> None:
    out, code = _run_in_pty(workspace, b"y", "yes.txt")
    assert code == 0 and "approve write (SideEffecting): yes.txt?" in out
    assert (workspace / "yes.txt").read_text() == "approved\n"


def test_the_terminal_is_asked_and_no_refuses_it(workspace: Path) -> None:
    out, code = _run_in_pty(workspace, b"n", "no.txt")
    assert code == 1 and "declined" in out  # blocked: ran but not ok (docs/cli.md)
    assert not (workspace / "no.txt").exists()


def test_ctrl_c_while_the_question_waits_exits_130_at_once(workspace: Path) -> None:
    """The question is pending on /dev/tty; ^C on the terminal ends the command, nothing written."""
    env = zuno_env({"ZUNO_CONFIG_CONTENT": json.dumps({"permission": {"strict": True}})})
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(workspace)
        call = json.dumps({"path": "never.txt", "content": "x\n"})
        os.execve(sys.executable, [sys.executable, "-m", "zuno", "call", "write", call], env)
    seen = b""
    interrupted_at: float | None = None
    deadline = time.monotonic() + 60
    status: int | None = None
    try:
        while time.monotonic() < deadline:
            done, wstatus = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wstatus
                break
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    pass
            if interrupted_at is None and b"[y/N]" in seen:
                os.write(fd, b"\x03")  # the terminal's interrupt character: SIGINT to the foreground
                interrupted_at = time.monotonic()
                deadline = interrupted_at + 30  # it must not wait for an answer that never comes
    finally:
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert interrupted_at is not None, seen.decode(errors="replace")
    assert status is not None, "zuno still waited on the terminal 30 s after ^C"
    assert os.waitstatus_to_exitcode(status) == 130
    assert not (workspace / "never.txt").exists()

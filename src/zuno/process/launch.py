"""Starting a command behind the guard: checked against execve's rules, then handed to the guard
fork-server, or to a directly started guard when the server is unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import subprocess
import sys
import threading
import time
import uuid

from zuno import limits
from zuno.process.command import CommandSpec
from zuno.process.execve import exec_problem
from zuno.process.running import RunningCommand
from zuno.process.server import GUARD_PATH, _lifeline_fd, _server

_F_SETPIPE_SZ = 1031


def _safe_label(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label)[:40].strip("-.") or "cmd"


async def start(spec: CommandSpec) -> RunningCommand:
    """Start ``spec.argv`` behind the guard, in a new process group. Returns once the command is
    running (or the guard reported that it could not run it: ``exit`` is then already set, with
    the guard's diagnostic and 125/126/127)."""
    loop = asyncio.get_running_loop()
    spec.log_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    log_path = spec.log_dir / f"{stamp}-{_safe_label(spec.label)}-{uuid.uuid4().hex[:8]}.log"
    rc = RunningCommand(spec, log_path, loop)
    rc._log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    if not spec.argv:
        rc._fail("nothing to run: the argument vector is empty; the command did not run")
        return rc
    problem = exec_problem(spec.argv, spec.env)
    if problem is not None:
        rc._fail(f"cannot start {spec.argv[0]}: {problem.describe()}; the command did not run")
        return rc
    cap_r, cap_w = os.pipe2(os.O_CLOEXEC)
    st_r, st_w = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(cap_w, _F_SETPIPE_SZ, limits.PROCESS_PIPE_SIZE)
    os.set_blocking(cap_r, False)
    if _server.spawn(spec, cap_w, st_w):
        os.close(cap_w)
        os.close(st_w)
    else:
        life_r = _lifeline_fd()
        try:
            proc = subprocess.Popen(  # noqa: ASYNC220 - a fork+exec, no waiting
                [sys.executable, "-I", "-S", str(GUARD_PATH), str(life_r), str(st_w), str(spec.cwd), "--", *spec.argv],
                stdin=subprocess.DEVNULL,
                stdout=cap_w,
                stderr=cap_w,
                pass_fds=(life_r, st_w),
                start_new_session=True,
                env=spec.env,
                close_fds=True,
            )
        except (OSError, ValueError) as e:
            for fd in (cap_r, cap_w, st_r, st_w):
                os.close(fd)
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            rc._fail(f"could not start the guard ({why}); the command did not run")
            return rc
        os.close(cap_w)
        os.close(st_w)
        rc._proc = proc
        rc.guard_pid = proc.pid
    rc._thread = threading.Thread(target=rc._pump, args=(cap_r, st_r), name="zuno-capture", daemon=True)
    rc._thread.start()
    await rc._spawned.wait()
    return rc

"""The guard fork-server (``guard.py --server``) and the lifeline that ties every guard to this
process. The server is exec'd once with the withheld environment and forks a guard per command;
``zuno.process.USE_GUARD_SERVER = False`` makes every guard its own interpreter instead.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from zuno.process.command import CommandSpec
from zuno.process.environment import withheld_environment

GUARD_PATH = Path(__file__).with_name("guard.py")


# -- the lifeline ---------------------------------------------------------------------------------

_lifeline: tuple[int, int, int] | None = None  # (pid, read end, write end)
_lifeline_lock = threading.Lock()


def _lifeline_fd() -> int:
    """The read end every guard holds; this process keeps the only write end (close-on-exec)."""
    global _lifeline
    with _lifeline_lock:
        if _lifeline is None or _lifeline[0] != os.getpid():
            r, w = os.pipe2(os.O_CLOEXEC)
            _lifeline = (os.getpid(), r, w)
        return _lifeline[1]


class _GuardServer:
    """The guard fork-server of this process (``guard.py --server``): started once, it forks a
    guard per command, so a command does not pay for a Python interpreter's start-up. When it is
    unavailable, ``start`` spawns the guard directly (same guard, same behaviour, slower)."""

    def __init__(self) -> None:
        self.pid_owner = 0
        self.sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.failed = False

    def _ensure(self) -> socket.socket | None:
        if self.pid_owner != os.getpid():
            self.sock, self.proc, self.failed, self.pid_owner = None, None, False, os.getpid()
        if self.sock is not None and self.proc is not None and self.proc.poll() is None:
            return self.sock
        if self.failed:
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        life_r = _lifeline_fd()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(GUARD_PATH), "--server", str(theirs.fileno()), str(life_r)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(), life_r),
                start_new_session=True,
                close_fds=True,
                # Exec'd with the withheld environment: the guards it forks are every command's
                # parent, and /proc/PID/environ of a process is what it was exec'd with.
                env=withheld_environment(),
            )
        except OSError:
            ours.close()
            self.failed = True
            return None
        finally:
            theirs.close()
        self.sock = ours
        return ours

    def spawn(self, spec: CommandSpec, capture_w: int, status_w: int) -> bool:
        if not _use_server():
            return False
        msg = json.dumps({"cwd": str(spec.cwd), "argv": list(spec.argv), "env": dict(spec.env)}).encode()
        with self.lock:
            for _ in range(2):
                sock = self._ensure()
                if sock is None:
                    return False
                try:
                    socket.send_fds(sock, [msg], [capture_w, status_w])
                    return True
                except OSError as e:
                    if e.errno == errno.EMSGSIZE:
                        return False  # too big for one message: a direct guard runs it; the server is fine
                    # the server died: start another once, else fall back to a direct guard
                    with contextlib.suppress(OSError):
                        sock.close()
                    self.sock = None
            return False


_server = _GuardServer()


def _use_server() -> bool:
    """The switch is ``zuno.process.USE_GUARD_SERVER`` (set False: no fork-server)."""
    return bool(getattr(sys.modules.get("zuno.process"), "USE_GUARD_SERVER", True))


def prestart() -> None:
    """Start the guard fork-server now (else the first command starts it). Optional."""
    if _use_server():
        with _server.lock:
            _server._ensure()

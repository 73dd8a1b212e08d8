"""The child-process guard: a small supervisor between Zuno and one command's process group.

Run as a plain script (``python -I -S guard.py LIFELINE_FD STATUS_FD CWD -- ARGV...``), never
imported by Zuno at run time: it imports nothing of Zuno and as little of the standard library as
it can, because its start-up time is part of every shell call.

What it does:

* Zuno starts it in a new session (so a terminal's Ctrl-C reaches Zuno, not the command). Its
  stdout/stderr are the capture pipe; stdin is /dev/null.
* It becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``), so members of the command's group
  whose parent exits are re-parented to it and reaped, and a group of zombies does not look alive.
* It spawns ARGV in a NEW process group (pgid = the command's pid), with default signal
  dispositions and an empty signal mask.
* It is tied to Zuno's lifetime by a lifeline pipe: Zuno holds the only write end, so when Zuno
  dies for any reason (kill -9 included) the read end reports end-of-file, and the guard kills
  the whole group with SIGKILL before it exits. ``PR_SET_PDEATHSIG`` wakes it as well.
* It reports its own failures with one diagnostic line on the captured stderr, which only it
  writes (the line starts with ``zuno-guard:``), and the same line on a private status pipe that
  the command cannot reach. Exit statuses, as for timeout/env/nohup: 125 = the guard failed,
  126 = the program exists but could not be executed, 127 = it could not be found.
* Status lines on STATUS_FD (space separated, one per line):
    ``spawned PID STARTTIME``          the command runs; pgid = PID
    ``diag CODE TEXT``                 the guard's own diagnostic, sent only before the command was
                                       exec'd: the command provably did not run
    ``exit RC|- SIG|- MEMBERS``        the command's own process exited; MEMBERS = ``pid:start,...``
                                       (the group's members at that moment, or ``-``)
    ``gone``                           the whole process group has exited
    ``lifeline``                       Zuno went away; the group was killed
* It exits once the whole group has exited, with the command's status (128+N for a signal).
"""

import _signal
import os
import select
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_LINGER_S = 0.05
POLL_LINGER_MAX_S = 0.5
DIAG_PREFIX = "zuno-guard:"
SPAWNED = False  # set once the command was exec'd: a failure after that cannot say "nothing ran"


_libc = None


def _prctl(option: int, value: int) -> None:
    global _libc
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(option, value, 0, 0, 0)
    except Exception:  # best effort; the lifeline still ties us to Zuno
        pass


def _starttime(pid: int) -> tuple[int, int] | None:
    """(pgid, starttime) of pid from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def _members(pgid: int) -> list[tuple[int, int]]:
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        st = _starttime(int(name))
        if st is not None and st[0] == pgid:
            found.append((int(name), st[1]))
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.kill(-pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _which(name: str, path: str | None) -> str | None:
    """Resolve name on the command's own PATH; a match that is not executable is returned so the
    spawn reports "cannot execute" (126) rather than "not found" (127)."""
    if "/" in name:
        return name
    not_executable = None
    for d in (path if path is not None else "/usr/local/bin:/usr/bin:/bin").split(":"):
        cand = os.path.join(d or ".", name)
        if os.path.isfile(cand):
            if os.access(cand, os.X_OK):
                return cand
            not_executable = not_executable or cand
        elif os.path.isdir(cand):
            not_executable = not_executable or cand
    return not_executable


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "--server":
        return serve(int(argv[2]), int(argv[3]))
    try:
        lifeline = int(argv[1])
        status = int(argv[2])
        cwd = argv[3]
        if argv[4] != "--" or len(argv) < 6:
            raise ValueError("usage")
        cmd = argv[5:]
    except (IndexError, ValueError):
        sys.stderr.write(f"{DIAG_PREFIX} 125: usage: guard.py LIFELINE_FD STATUS_FD CWD -- ARGV...\n")
        return 125
    os.set_inheritable(lifeline, False)
    os.set_inheritable(status, False)
    try:
        return supervise(lifeline, status, cwd, cmd, dict(os.environ))
    except Exception as e:
        if SPAWNED:
            raise
        line = f"{DIAG_PREFIX} 125: the guard failed: {_why(e)}; the command did not run"
        try:  # before the exec the guard may say that nothing ran, on its private pipe as well
            os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))
            os.write(status, f"diag 125 {line}\n".encode("utf-8", "backslashreplace"))
        except OSError:
            pass
        return 125


def serve(sock: int, lifeline: int) -> int:
    """Fork-server mode: one per Zuno process, so a command does not pay for a Python start-up.

    Each request on the SOCK_SEQPACKET socket is one JSON message ``{"cwd", "argv", "env"}``
    (strings carry undecodable bytes as surrogate escapes) with two descriptors (the capture pipe's write end, the
    status pipe's write end). The server forks; the child starts a new session, makes the capture
    pipe its stdout/stderr and supervises the command exactly like a guard started directly.
    The server exits when the lifeline ends (Zuno is gone) or the socket closes; the guards it
    forked hold the lifeline themselves and kill their groups on their own."""
    import json
    import socket

    os.set_inheritable(lifeline, False)
    os.set_inheritable(sock, False)
    conn = socket.socket(fileno=sock)
    _prctl(PR_SET_CHILD_SUBREAPER, 0)  # loads libc once here, so forked guards need not
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, lambda *_: None)
    for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(sig, lambda *_: None)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGTERM)
    while True:
        try:
            ready, _, _ = select.select([conn, lifeline, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except OSError:
                pass
            while True:  # reap guards that finished
                try:
                    child, _status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if child == 0:
                    break
        if lifeline in ready:
            try:
                if not os.read(lifeline, 64):
                    return 0
            except OSError:
                return 0
        if conn in ready:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 22, 4)
            except OSError:
                return 0
            if not msg:
                return 0
            if len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                continue
            capture, status = fds
            try:
                req = json.loads(msg)
                cwd, cmd, env = str(req["cwd"]), [str(a) for a in req["argv"]], dict(req["env"])
            except (ValueError, KeyError, TypeError):
                cwd, cmd, env = "/", [], {}
            pid = os.fork()
            if pid == 0:
                code = 125
                try:
                    conn.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    _signal.set_wakeup_fd(-1)
                    for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGCHLD):
                        _signal.signal(sig, _signal.SIG_DFL)
                    os.setsid()
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    os.dup2(capture, 1)
                    os.dup2(capture, 2)
                    os.close(null)
                    os.close(capture)
                    os.set_inheritable(status, False)
                    os.write(status, f"guard {os.getpid()}\n".encode())
                    if not cmd:
                        raise ValueError("the request named no command")
                    code = supervise(lifeline, status, cwd, cmd, env)
                except BaseException as e:
                    line = f"{DIAG_PREFIX} 125: the guard failed: {_why(e)}"
                    if not SPAWNED:
                        line += "; the command did not run"
                    try:
                        os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))
                        if not SPAWNED:  # only before the exec may the guard say that nothing ran
                            os.write(status, f"diag 125 {line}\n".encode("utf-8", "backslashreplace"))
                    except OSError:
                        pass
                finally:
                    os._exit(code)
            os.close(capture)
            os.close(status)


def supervise(lifeline: int, status: int, cwd: str, cmd: list[str], env: dict[str, str]) -> int:
    def report(line: str) -> None:
        try:
            os.write(status, (line + "\n").encode("utf-8", "backslashreplace"))
        except OSError:
            pass

    def diag(code: int, text: str) -> int:
        line = f"{DIAG_PREFIX} {code}: {text}"
        try:
            os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))
        except OSError:
            pass
        report(f"diag {code} {line}")
        return code

    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, lambda *_: None)
    _signal.signal(_signal.SIGUSR1, lambda *_: None)
    _signal.signal(_signal.SIGTERM, lambda *_: None)  # Zuno stops the group, not the guard
    _signal.signal(_signal.SIGINT, lambda *_: None)
    _signal.signal(_signal.SIGHUP, lambda *_: None)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGUSR1)

    try:
        os.chdir(cwd)
    except OSError as e:
        return diag(125, f"cannot enter the working directory {cwd}: {e.strerror}; the command did not run")
    path = _which(cmd[0], env.get("PATH"))
    if path is None:
        return diag(127, f"{cmd[0]}: command not found; the command did not run")
    sigdef = [
        s
        for s in (
            _signal.SIGPIPE,
            getattr(_signal, "SIGXFSZ", None),
            _signal.SIGCHLD,
            _signal.SIGUSR1,
            _signal.SIGTERM,
            _signal.SIGINT,
            _signal.SIGHUP,
            _signal.SIGQUIT,
        )
        if s is not None
    ]
    # Every diag below is sent before the command was exec'd: the guard knows nothing ran.
    try:
        pid = os.posix_spawn(path, cmd, env, setpgroup=0, setsigdef=sigdef, setsigmask=[])
    except FileNotFoundError:
        return diag(127, f"{cmd[0]}: not found; the command did not run")
    except (PermissionError, IsADirectoryError, NotADirectoryError) as e:
        return diag(126, f"{cmd[0]}: cannot execute: {e.strerror}; the command did not run")
    except ValueError as e:  # a NUL byte or a lone surrogate in an argument or the environment
        return diag(
            125,
            f"cannot start {cmd[0]}: an argument or environment string cannot be passed to a program "
            f"({_why(e)}); the command did not run",
        )
    except OSError as e:
        if e.errno == 8:  # ENOEXEC
            return diag(126, f"{cmd[0]}: cannot execute: {e.strerror}; the command did not run")
        if e.errno == 7:  # E2BIG
            return diag(
                125,
                f"cannot start {cmd[0]}: the arguments and environment are too long for execve "
                "(E2BIG); the command did not run",
            )
        return diag(125, f"cannot start {cmd[0]}: {e.strerror}; the command did not run")
    global SPAWNED
    SPAWNED = True
    pgid = pid
    st = _starttime(pid)
    report(f"spawned {pid} {st[1] if st else 0}")
    # Our copy of the capture pipe stays open until the command's own process exits, so a late
    # diagnostic could still be written; then it is closed so the capture ends with the group.
    null = os.open(os.devnull, os.O_RDWR)

    leader_status: int | None = None
    linger = POLL_LINGER_S
    while True:
        timeout = None if leader_status is None else linger
        try:
            ready, _, _ = select.select([lifeline, wake_r], [], [], timeout)
        except InterruptedError:
            ready = []
        if lifeline in ready:
            try:
                data = os.read(lifeline, 64)
            except OSError:
                data = b""
            if not data:  # Zuno is gone: the group goes with it
                if leader_status is None or _group_alive(pgid):
                    try:
                        os.kill(-pgid, 9)
                    except OSError:
                        pass
                report("lifeline")
                return 125 if leader_status is None else _code(leader_status)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except OSError:
                pass
        # Reap everything that is ours (the command and re-parented members).
        while True:
            try:
                child, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if child == 0:
                break
            if child == pid and leader_status is None:
                leader_status = wstatus
                members = _members(pgid) if _group_alive(pgid) else []
                rc = str(os.waitstatus_to_exitcode(wstatus)) if os.WIFEXITED(wstatus) else "-"
                sig = str(os.WTERMSIG(wstatus)) if os.WIFSIGNALED(wstatus) else "-"
                listed = ",".join(f"{p}:{s}" for p, s in members) or "-"
                report(f"exit {rc} {sig} {listed}")
                os.dup2(null, 1)
                os.dup2(null, 2)
        if leader_status is not None:
            if not _group_alive(pgid):
                report("gone")
                return _code(leader_status)
            linger = min(linger * 2, POLL_LINGER_MAX_S) if not ready else POLL_LINGER_S


def _why(e: BaseException) -> str:
    """An exception in words (its message; the OS's words for an OSError), not a Python rendering."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or "an internal error"


def _code(wstatus: int) -> int:
    if os.WIFSIGNALED(wstatus):
        return 128 + os.WTERMSIG(wstatus)
    return os.waitstatus_to_exitcode(wstatus)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except SystemExit:
        raise
    except BaseException as e:
        try:
            sys.stderr.write(f"{DIAG_PREFIX} 125: the guard failed: {_why(e)}\n")
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(125)

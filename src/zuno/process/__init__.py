"""The process layer beneath ``shell`` and background jobs: a guarded command in its own group.

Use::

    from zuno.process import CommandSpec, start

    running = await start(CommandSpec(argv=["bash", "-c", script], cwd=root, env=env, log_dir=logs))
    info = await running.wait(timeout=600)        # ExitInfo | None (None = timed out; nothing killed)
    if info is None:
        await running.stop("timeout")             # TERM, then KILL, the whole group; only while provably ours
        info = await running.wait()
    data = running.read_all()                     # the exact bytes (stdout+stderr merged)
    if info.returncode in (125, 126, 127) and info.guard_diagnostic: ...   # the guard's own verdict
    if running.group_alive(): ...                 # members of the command's group still run

The modules: ``command`` (what to run, how it ended), ``launch`` (``start``), ``running``
(``RunningCommand``: capture, exit, group truth, stop), ``server`` (the guard fork-server and the
lifeline), ``guard.py`` (the guard itself, a standalone script), ``execve`` (what can be exec'd),
``environment`` (the withheld ``ZUNO_*`` namespace), ``procfs`` and ``tail``.

How it works:

* ``start`` spawns the guard (``guard.py``, a small standalone supervisor) in a new session: a
  fork of this process's guard fork-server (``guard.py --server``, started once, so a command
  costs a fork rather than an interpreter start-up), or ``python -I -S guard.py`` directly when
  the server is unavailable; the guard spawns ``argv`` in a NEW process group
  (pgid = the command's pid). The guard is a child subreaper, reaps everything in the group, and
  exits once the whole group has exited.
* Tied to Zuno's lifetime: every guard holds the read end of one lifeline pipe whose only write
  end is in this process. When this process dies (kill -9 included), the guard sees end-of-file
  and SIGKILLs the group. PR_SET_PDEATHSIG wakes the guard as well.
* The guard's own failures: exit 125 (the guard failed), 126 (found, could not execute), 127 (not
  found), with one line starting ``zuno-guard:`` on the captured stderr AND on a private status
  pipe the command cannot write to. ``ExitInfo.guard_diagnostic`` comes only from that private
  pipe, so a command printing the same text cannot forge it. The guard writes that line only
  before the command was exec'd, so ``ExitInfo.never_started`` is then proven (nothing ran); a
  guard that dies afterwards leaves 125 without it (what the command did is unknown).
* What execve would reject (a NUL byte, E2BIG: ``execve.exec_problem``) is never started: ``start``
  returns at once with 125, the reason, and ``never_started``.
* Environment: every guard, and the fork-server they are forked from, holds the withheld
  environment (``environment.py``), so no ancestor of a command shows ``ZUNO_*`` in /proc.
* Capture: stdout and stderr are one pipe (merged, in write order). A reader thread copies the
  exact bytes to a log file on disk and keeps the most recent 2 MiB (``limits.PROCESS_MEMORY_TAIL``)
  in memory. ``window()`` serves from memory when it can and from the file otherwise (``from_disk``).
* ``exit`` is set once the command's own process exited and every byte it wrote was read (the
  pipe is drained when the guard reports the exit, so nothing the leader wrote is missed).
  Members of its group may still run and write: ``group_alive()`` / ``wait_group()``.
* Group truth: a stop signals the group only while a process recorded as a member (the leader
  before it exits; the members listed at its exit afterwards) is provably still in it: same pid,
  same start time, same pgid in /proc. A pgid cannot be reused while any member lives, so such a
  member proves the group is still ours. Processes that left the group (setsid/setpgid) are not
  tracked and not stopped.
* Sealing: ``seal()`` (and ``close()``) make the capture final. What is read after that is dropped
  and the reader closes its end of the pipe, so an escapee still writing to it gets EPIPE / SIGPIPE
  and the log stops growing. ``procfs.pipe_holders`` names the processes still holding the pipe.
"""

from __future__ import annotations

from zuno.process import procfs
from zuno.process.command import GUARD_CODES, GUARD_DIAG_PREFIX, CommandSpec, ExitInfo, StopResult
from zuno.process.execve import ExecProblem, exec_problem
from zuno.process.launch import start
from zuno.process.running import RunningCommand
from zuno.process.server import GUARD_PATH, _server, prestart

__all__ = [
    "GUARD_CODES",
    "GUARD_DIAG_PREFIX",
    "GUARD_PATH",
    "CommandSpec",
    "ExecProblem",
    "ExitInfo",
    "RunningCommand",
    "StopResult",
    "_server",
    "exec_problem",
    "prestart",
    "procfs",
    "start",
]

# Set False to start every guard as its own interpreter (no fork-server); read by zuno.process.server.
USE_GUARD_SERVER = True

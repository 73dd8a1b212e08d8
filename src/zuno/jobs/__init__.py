"""Background jobs: a session service that owns guarded commands running past their call.

For the shell tool (what it calls)::

    from zuno.jobs import JobManager

    jobs = JobManager.of(ctx)                       # the session's manager (a Services singleton)

    # run_in_background: true
    job = await jobs.start(spec, label=command, command=command, purpose=backgroundPurpose,
                           deadline_s=timeout_s_or_None, call_seq=ctx.call_seq)

    # a foreground command that passed yield_time_ms, or whose own process exited while
    # members of its group still run (promotion even with yield_time_ms 0):
    job = jobs.adopt(running, label=command, command=command, purpose=backgroundPurpose,
                     deadline_s=timeout_s_or_None, call_seq=ctx.call_seq,
                     promoted_because=PROMOTED_YIELD | PROMOTED_LINGERING)

    return job.started_output()                     # the ToolOutput for the shell call (16 KiB preview rule)

Deadlines: ``deadline_s`` None or 0 means none; anything above ``limits.BACKGROUND_MAX_S`` (6 h)
is clamped to it. The deadline counts from the command's own start (a promoted command has
already used part of it) and stops the whole group with reason "timeout".

A job is active until its whole process group has exited, not just the command's own process.
Its deadline, ``bg cancel`` / ``job_kill`` and the end of the session (``aclose``, reason
"session-end") stop the group. Processes that left the group (setsid/setpgid) are not tracked.
A job's output is final when it ends: the capture is sealed (``RunningCommand.seal``), so a process
that left the group and still holds the pipe cannot grow the log past the recorded total; it gets
EPIPE / SIGPIPE, and the job's end names it (``capture_cut``, ``status.cut_text``).

Completion is delivered exactly once through one durable owner, the job's row in ``jobs``:
when the group has exited the completion is queued as a notice for the next step (the
callback); a terminal ``bg output`` / ``bg wait`` / ``job_output`` that sees the end first, or
while that notice is still unconsumed, claims it instead and deletes the queued notice in the
same transaction. A notice already handed to a step stays delivered.

The modules: ``manager`` (``JobManager``), ``job`` (``Job``), ``status`` (promotion reasons,
terminal statuses, exit text) and ``schema`` (the ``jobs`` table).
"""

from zuno.jobs.job import Job
from zuno.jobs.manager import JobManager
from zuno.jobs.schema import MIGRATIONS
from zuno.jobs.status import (
    PROMOTED_LINGERING,
    PROMOTED_REQUESTED,
    PROMOTED_YIELD,
    TERMINAL_BY_REASON,
    exit_text,
    fmt_s,
    label_line,
    status_of,
)

__all__ = [
    "MIGRATIONS",
    "PROMOTED_LINGERING",
    "PROMOTED_REQUESTED",
    "PROMOTED_YIELD",
    "TERMINAL_BY_REASON",
    "Job",
    "JobManager",
    "exit_text",
    "fmt_s",
    "label_line",
    "status_of",
]

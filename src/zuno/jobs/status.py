"""What a job's end is called: why it was promoted, its terminal status, its exit in words."""

from __future__ import annotations

from typing import Any

from zuno.process import ExitInfo

PROMOTED_REQUESTED = "run_in_background"
PROMOTED_YIELD = "yield_time_ms"
PROMOTED_LINGERING = "group members still running after the command exited"


TERMINAL_BY_REASON = {
    "timeout": "timed_out",
    "cancel": "cancelled",
    "kill": "killed",
    "session-end": "stopped",
    "ceiling": "timed_out",
}


def status_of(info: ExitInfo | None, group_gone: bool) -> str:
    """running | completed | failed | killed | cancelled | timed_out | stopped | guard_failed"""
    if info is None or not group_gone:
        return "running"
    if info.guard_failed:
        return "guard_failed"
    if info.killed_by:
        return TERMINAL_BY_REASON.get(info.killed_by, "killed")
    if info.returncode is None:
        return "killed"
    return "completed" if info.returncode == 0 else "failed"


def exit_text(info: ExitInfo | None) -> str:
    if info is None:
        return "still running"
    if info.guard_diagnostic:
        return f"exit {info.returncode} (the guard's: {info.guard_diagnostic})"
    if info.returncode is None:
        s = f"killed by signal {info.signal}"
    else:
        s = f"exit {info.returncode}"
    if info.killed_by:
        s += f", stopped ({info.killed_by})"
    if not info.settled:
        s += ", status not settled: it proves nothing"
    return s


def fmt_s(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def label_line(label: str, width: int = 120) -> str:
    """A job's label on one line, for listings and notices: a multi-line command (a here-document,
    a script) is shown by its first line and how many more it has, so one job stays one line."""
    lines = label.splitlines() or [""]
    first = lines[0] if len(lines[0]) <= width else lines[0][: width - 1] + "…"
    more = len(lines) - 1
    return first + (f" … (+{more} line{'s' if more > 1 else ''})" if more else "")


def cut_text(holders: list[Any]) -> str:
    """What a job's output says when its capture was cut at the job's end: which processes (that
    left its process group) still held the output open, and what became of what they write."""
    if holders:
        names = ", ".join(f"{pid} ({name})" for pid, name in holders)
        who = f"process{'es' if len(holders) > 1 else ''} {names}, which left the job's process group,"
    else:  # none could be looked up (a session's end stopping a job whose members did not all exit)
        who = "a process"
    return (
        f"its output is final as recorded: {who} still held it open when the job ended. Zuno stopped reading "
        "and closed its end of the pipe, so what such a process writes there now fails (EPIPE / SIGPIPE) and "
        "is not kept; a daemon meant to outlive its job needs its output sent to a file of its own "
        "(> file 2>&1)"
    )

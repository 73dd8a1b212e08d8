"""Who is writing a streamed answer: the process that saves its text (``agent_partials``), and
whether that very process still runs.

A pid alone proves nothing (pids are reused), so the writer is recorded as its pid, its start time
(field 22 of ``/proc/<pid>/stat``, in clock ticks since boot) and the boot's id
(``/proc/sys/kernel/random/boot_id``: a start time counts from one boot only). A reader
(``zuno show``) asks /proc whether that exact process still runs: then the answer is still
streaming; otherwise its process died before the answer completed.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Literal

from zuno.process import procfs

WriterState = Literal["streaming", "died", "unknown"]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True, slots=True)
class Writer:
    pid: int
    start: int | None  # None where /proc does not say (then the pid alone is checked)
    boot: str | None


def boot_id() -> str | None:
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def this_process() -> Writer:
    pid = os.getpid()
    st = procfs.stat(pid)
    return Writer(pid, st[1] if st is not None else None, boot_id())


def writer_state(pid: int | None, start: int | None, boot: str | None) -> WriterState:
    """Does the process recorded as (pid, start, boot) still run? ``unknown`` when no writer was
    recorded (a row saved before Zuno recorded one)."""
    if pid is None:
        return "unknown"
    if boot is not None and boot != boot_id():
        return "died"  # the machine restarted since
    if start is None:
        return _pid_alone(pid)
    st = procfs.stat(pid)
    if st is None or st[1] != start or st[2] in ("Z", "X", "x"):  # gone, another process, or a zombie
        return "died"
    return "streaming"


def _pid_alone(pid: int) -> WriterState:
    """Without a start time only the pid can be checked (a reused pid reads as alive)."""
    with contextlib.suppress(PermissionError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "died"
    return "streaming"

"""One background job: a guarded command that runs past its call, and what it tells the model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno import limits
from zuno.jobs.status import cut_text, exit_text, fmt_s
from zuno.process import RunningCommand, StopResult
from zuno.tool import ToolOutput

if TYPE_CHECKING:
    from zuno.jobs.manager import JobManager


@dataclass
class Job:
    id: str
    manager: JobManager
    running: RunningCommand
    label: str
    command: str | None
    purpose: str | None
    promoted_because: str
    call_seq: int | None
    deadline_at: float | None
    started_at: float
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    status: str = "running"
    # job_output's incremental cursor and polling count
    read_cursor: int = 0
    empty_polls: int = 0
    read_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    watcher: asyncio.Task[None] | None = None
    stop_result: StopResult | None = None
    # Called once when the job has ended (the shell tool stores the verification receipt of the
    # job's own exit there); returns the receipt id its completion cites.
    on_end: Callable[[Job], str | None] | None = None
    receipt_id: str | None = None
    # The capture was cut at the job's end (``RunningCommand.seal``): the processes found still
    # holding the output open, [(pid, name)] (empty when none could be named); None when not cut.
    capture_cut: list[tuple[int, str]] | None = None
    cut_holders: list[tuple[int, str]] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.running.log_path

    @property
    def active(self) -> bool:
        return not self.finished.is_set()

    def facts(self) -> dict[str, Any]:
        now = time.time()
        info = self.running.exit
        out: dict[str, Any] = {
            "taskID": self.id,
            "job_id": self.id,
            "status": self.status,
            "label": self.label,
            "pid": self.running.pid,
            "pgid": self.running.pgid,
            "logPath": str(self.log_path),
            "totalWritten": self.running.total_written,
            "elapsed_s": round(now - self.started_at, 3),
            "quiet_s": round(now - self.running.last_output_at, 3),
            "promotedBecause": self.promoted_because,
            "commandExited": info is not None,
            "groupAlive": self.active,
        }
        if self.purpose:
            out["backgroundPurpose"] = self.purpose
        if self.capture_cut is not None:
            out["outputCut"] = {"holders": [{"pid": p, "name": n} for p, n in self.capture_cut]}
        if self.deadline_at is not None:
            out["deadline_in_s"] = round(self.deadline_at - now, 3)
        if info is not None:
            out["exit"] = {
                "returncode": info.returncode,
                "signal": info.signal,
                "killed_by": info.killed_by,
                "guard_diagnostic": info.guard_diagnostic,
                "settled": info.settled,
            }
        return out

    def status_line(self) -> str:
        parts = [self.status]
        info = self.running.exit
        if info is not None:
            parts.append(exit_text(info))
            if self.active:
                parts.append("its process exited; members of its process group still run")
        parts.append(f"elapsed {fmt_s(time.time() - self.started_at)}")
        if self.purpose:
            parts.append(f"backgroundPurpose {self.purpose}")
        if self.capture_cut is not None:
            parts.append(cut_text(self.capture_cut))
        return "[status: " + "; ".join(parts) + "]"

    def started_output(self, head: str = "") -> ToolOutput:
        """What a shell call that started or became this job returns: the output so far (over
        16 KiB: a short preview and the log file's path) and how to read on."""
        total = self.running.total_written
        how = (
            f"{self.manager.read_hint(self.id, wait=True)}; the complete output is in "
            f"{self.manager.display(self.log_path)}. Completion arrives by itself as a notice: do not poll."
        )
        if self.purpose == "remoteObserver":
            how += (
                " backgroundPurpose remoteObserver: this only observes remote work; refresh the remote system's "
                "authoritative state before claiming it completed."
            )
        first = f"[background job {self.id} — {self.promoted_because}; {self.status}; {total} bytes of output so far]"
        if total > limits.BACKGROUND_PREVIEW_LIMIT:
            data = self.running.read_range(max(0, total - limits.BACKGROUND_PREVIEW_BYTES), total)
            body = (
                f"[output is {total} bytes, over {limits.BACKGROUND_PREVIEW_LIMIT}: showing the last {len(data)} "
                f"bytes; the whole log is {self.manager.display(self.log_path)} — read or search it instead of "
                "re-running]\n" + data.decode("utf-8", "backslashreplace")
            )
            raw = body.encode("utf-8", "surrogateescape")
        else:
            data = self.running.read_range(0, total)
            body = data.decode("utf-8", "backslashreplace")
            raw = data
        return ToolOutput(
            text=body if total else "(no output yet)",
            raw=raw if total else None,
            head="\n".join(x for x in (head, first) if x),
            tail=how,
            bounded=total > limits.BACKGROUND_PREVIEW_LIMIT,
            metadata={"background": self.facts()},
        )

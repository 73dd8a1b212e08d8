"""The session's job manager: starting and adopting jobs, deadlines, stops, and delivering each
job's completion exactly once through its durable row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno import limits
from zuno.jobs.job import Job
from zuno.jobs.status import PROMOTED_REQUESTED, TERMINAL_BY_REASON, cut_text, exit_text, label_line, status_of
from zuno.process import CommandSpec, ExitInfo, RunningCommand, StopResult, procfs, start

if TYPE_CHECKING:
    from zuno.store import Store
    from zuno.tool import ToolContext


class JobManager:
    """The session's background jobs. Create through ``JobManager.of(ctx)``."""

    def __init__(self, store: Store, session_id: str, root: Path, log_dir: Path, profile: str = "zuno") -> None:
        self.profile = profile
        self.store = store
        self.session_id = session_id
        self.root = root
        self.log_dir = log_dir
        self.jobs: dict[str, Job] = {}
        self._finished_order: list[str] = []
        self._closed = False
        self._orphans_marked = False
        self.stopped_at_close: list[Job] = []  # jobs still running when the session ended

    @classmethod
    def of(cls, ctx: ToolContext) -> JobManager:
        def make() -> JobManager:
            jm = cls(
                ctx.store,
                ctx.session_id,
                ctx.workspace.root,
                ctx.workspace.ensure_state_dir() / "logs" / ctx.session_id,
                ctx.config.profile,
            )
            jm.mark_orphans()
            return jm

        return ctx.services.get(cls, make)

    @classmethod
    def for_session(cls, session: Any) -> JobManager:
        """The same service from the Python API (a ``zuno.runtime.Session`` that is open)."""
        rt = session.runtime

        def make() -> JobManager:
            logs = rt.workspace.ensure_state_dir() / "logs" / session.id
            jm = cls(rt.store, session.id, rt.workspace.root, logs, rt.surface.profile)
            jm.mark_orphans()
            return jm

        return session.services.get(cls, make)

    def read_hint(self, job_id: str, *, wait: bool = False) -> str:
        """How the model reads a job in this session's profile (chord has job_output, not bg)."""
        if self.profile == "chord":
            return f'Read it with job_output (job_id "{job_id}"' + (', wait "exit" to wait' if wait else "") + ")"
        return 'Read it with bg (action "output"' + (' or "wait"' if wait else "") + f', taskID "{job_id}")'

    def display(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)

    def mark_orphans(self) -> None:
        """Rows left 'running' by a process that ended without closing its session: their guard
        killed the group when that process died (the lifeline). Record that and queue the
        completion like any other."""
        if self._orphans_marked:
            return
        self._orphans_marked = True
        rows = self.store.query(
            "SELECT id, log_path, total_written FROM jobs WHERE session_id = ? AND status = 'running' "
            "AND ended_at IS NULL",
            (self.session_id,),
        )
        now = time.time()
        for r in rows:
            # The dead process never recorded how much its job wrote: the log it captured to holds
            # every byte, so its size is the count (not the 0 of a row nobody finished).
            try:
                written = os.stat(r["log_path"]).st_size
            except OSError:
                written = r["total_written"]
            self.store.execute(
                "UPDATE jobs SET status = 'lost', ended_at = ?, killed_by = COALESCE(killed_by, 'session-end'), "
                "total_written = ? WHERE id = ?",
                (now, written, r["id"]),
            )
            self._queue_callback(r["id"])

    # -- starting ---------------------------------------------------------------------------------

    async def start(
        self,
        spec: CommandSpec,
        *,
        label: str,
        command: str | None = None,
        purpose: str | None = None,
        deadline_s: float | None = None,
        call_seq: int | None = None,
    ) -> Job:
        """Start spec directly as a background job (run_in_background)."""
        running = await start(spec)
        return self.adopt(
            running,
            label=label,
            command=command,
            purpose=purpose,
            deadline_s=deadline_s,
            call_seq=call_seq,
            promoted_because=PROMOTED_REQUESTED,
        )

    def adopt(
        self,
        running: RunningCommand,
        *,
        label: str,
        purpose: str | None = None,
        deadline_s: float | None = None,
        call_seq: int | None,
        promoted_because: str,
        command: str | None = None,
    ) -> Job:
        """A command (foreground until now) becomes a background job owned by this session."""
        if deadline_s is not None and deadline_s <= 0:
            deadline_s = None
        if deadline_s is not None:
            deadline_s = min(float(deadline_s), limits.BACKGROUND_MAX_S)
        job_id = f"job_{uuid.uuid4().hex[:10]}"
        deadline_at = running.started_at + deadline_s if deadline_s is not None else None
        job = Job(
            id=job_id,
            manager=self,
            running=running,
            label=label[:200],
            command=command,
            purpose=purpose,
            promoted_because=promoted_because,
            call_seq=call_seq,
            deadline_at=deadline_at,
            started_at=running.started_at,
        )
        self.jobs[job_id] = job
        self.store.execute(
            "INSERT INTO jobs (id, session_id, call_seq, label, command, purpose, promoted_because, pid, pgid, "
            "log_path, started_at, deadline_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running')",
            (
                job_id,
                self.session_id,
                call_seq,
                job.label,
                command,
                purpose,
                promoted_because,
                running.pid,
                running.pgid,
                str(running.log_path),
                running.started_at,
                deadline_at,
            ),
        )
        self.store.add_event(
            self.session_id,
            "job-started",
            {"job": job_id, "pgid": running.pgid, "because": promoted_because, "purpose": purpose},
            call_seq=call_seq,
        )
        job.watcher = asyncio.get_running_loop().create_task(self._watch(job), name=f"zuno-job-{job_id}")
        return job

    # -- lifecycle --------------------------------------------------------------------------------

    async def _watch(self, job: Job) -> None:
        r = job.running
        try:
            while True:
                left = None if job.deadline_at is None else job.deadline_at - time.time()
                if left is not None and left <= 0:
                    job.stop_result = await r.stop("timeout")
                    if not r.group_alive():
                        break
                    left = limits.PROCESS_GUARD_LOST_POLL_S
                if await r.wait_group(left):
                    break
            # The group is gone; let the capture finish what members wrote (escapees may hold
            # the pipe forever, so this is bounded: then they are named, and the capture sealed).
            if not await r.wait_capture(limits.BACKGROUND_CAPTURE_DRAIN_S) and r.pipe_inode:
                job.cut_holders = await asyncio.to_thread(procfs.pipe_holders, r.pipe_inode, os.getpid())
            if r.exit is None:
                await r.wait(limits.BACKGROUND_CAPTURE_DRAIN_S)
        finally:
            self._finish(job)

    def _finish(self, job: Job) -> None:
        if job.finished.is_set():
            return
        r = job.running
        # Settled: the output is final from here on, whatever still holds the pipe (a process that
        # left the group), so the recorded total, the log and every later read agree.
        if r.seal():
            job.capture_cut = job.cut_holders
        info = r.exit
        job.status = status_of(info, True) if info is not None else "lost"
        if r.signalled_by and info is not None and not info.killed_by and not info.guard_failed:
            # Its own process had exited before the stop; the stop ended the members still
            # running in its group, so the job ended the way the stop says, not by that exit.
            job.status = TERMINAL_BY_REASON.get(r.signalled_by, "killed")
        if job.on_end is not None:
            try:
                job.receipt_id = job.on_end(job)
            except Exception as e:  # the end is recorded whatever the hook does
                self.store.add_event(
                    self.session_id, "job-receipt-failed", {"job": job.id, "error": str(e) or "an internal error"}
                )
        now = time.time()
        self.store.execute(
            "UPDATE jobs SET status = ?, returncode = ?, signal = ?, killed_by = ?, guard_diagnostic = ?, "
            "total_written = ?, exited_at = ?, ended_at = ?, receipt_id = ?, capture_cut = ? WHERE id = ?",
            (
                job.status,
                info.returncode if info else None,
                info.signal if info else None,
                info.killed_by if info else None,
                info.guard_diagnostic if info else None,
                r.total_written,
                r.exited_at,
                now,
                job.receipt_id,
                None if job.capture_cut is None else json.dumps(job.capture_cut),
                job.id,
            ),
        )
        self.store.add_event(
            self.session_id,
            "job-ended",
            {"job": job.id, "status": job.status, "exit": exit_text(info), "totalWritten": r.total_written}
            | ({} if job.capture_cut is None else {"outputCut": [list(h) for h in job.capture_cut]}),
            call_seq=job.call_seq,
        )
        job.finished.set()
        self._queue_callback(job.id)
        self._finished_order.append(job.id)
        # A running command keeps its newest 2 MiB in memory; ended ones only the most recent few.
        while len(self._finished_order) > limits.BACKGROUND_ENDED_TAILS_KEPT:
            old = self.jobs.get(self._finished_order.pop(0))
            if old is not None:
                old.running.release_memory()

    def completion_text(self, row: Any) -> str:
        purpose = row["purpose"]
        info = (
            ExitInfo(row["returncode"], row["signal"], row["guard_diagnostic"], True, row["killed_by"])
            if row["status"] not in ("lost",)
            else None
        )
        text = (
            f"Background job {row['id']} ({label_line(row['label'])}) ended: {row['status']}"
            + (f", {exit_text(info)}" if info else ", its process group was killed when the process holding it ended")
            + f"; {row['total_written'] or 0} bytes of output in {self.display(Path(row['log_path']))}. "
            f"{self.read_hint(row['id'])}."
        )
        cut = cut_of(row)
        if cut is not None:
            text += f" Note: {cut_text(cut)}."
        if row["receipt_id"]:
            text += f" [verification {row['receipt_id']}]"
        if purpose == "remoteObserver":
            text += (
                " backgroundPurpose remoteObserver: refresh the remote system's authoritative state before claiming "
                "that the remote work completed."
            )
        return text

    def _queue_callback(self, job_id: str) -> None:
        """The callback: queue the completion as a notice for the next step, unless an inline read
        already took it. One transaction, so it and an inline claim cannot both win."""
        with self.store.transaction() as db:
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["completion_state"] is not None:
                return
            data = {
                "job_id": job_id,
                "taskID": job_id,
                "status": row["status"],
                "returncode": row["returncode"],
                "signal": row["signal"],
                "killed_by": row["killed_by"],
                "backgroundPurpose": row["purpose"],
                "logPath": row["log_path"],
                "totalWritten": row["total_written"],
                "receiptId": row["receipt_id"],
            }
            cut = cut_of(row)
            if cut is not None:
                data["outputCut"] = [list(h) for h in cut]
            cur = db.execute(
                "INSERT INTO notices (session_id, kind, text, data, created_at) VALUES (?, ?, ?, ?, ?)",
                (self.session_id, "job_completed", self.completion_text(row), json.dumps(data), time.time()),
            )
            db.execute(
                "UPDATE jobs SET completion_state = 'queued', completion_via = 'callback', notice_seq = ? WHERE id = ?",
                (cur.lastrowid, job_id),
            )

    def claim_completion(self, job_id: str, via: str) -> tuple[bool, str]:
        """An inline read saw the job's end: take the completion if nobody consumed it yet.
        Returns (claimed, how it was delivered otherwise)."""
        with self.store.transaction() as db:
            row = db.execute(
                "SELECT completion_state, completion_via, notice_seq, status, ended_at FROM jobs WHERE id = ?",
                (job_id,),
            ).fetchone()
            if row is None or row["ended_at"] is None:
                return False, "not ended"
            state = row["completion_state"]
            if state == "delivered":
                return False, f"already delivered by {row['completion_via']}"
            if state == "queued":
                # Handed to a step already (delivered when that step ends) counts as consumed.
                in_flight = row["notice_seq"] is not None and row["notice_seq"] <= self.store.notices_in_flight(
                    self.session_id
                )
                gone = (
                    0
                    if in_flight
                    else db.execute(
                        "DELETE FROM notices WHERE seq = ? AND delivered_step IS NULL", (row["notice_seq"],)
                    ).rowcount
                )
                if not gone:
                    db.execute(
                        "UPDATE jobs SET completion_state = 'delivered', delivered_at = COALESCE(delivered_at, ?) "
                        "WHERE id = ?",
                        (time.time(), job_id),
                    )
                    return False, "already delivered by the callback (a notice)"
            db.execute(
                "UPDATE jobs SET completion_state = 'delivered', completion_via = ?, notice_seq = NULL, "
                "delivered_at = ? WHERE id = ?",
                (via, time.time(), job_id),
            )
            return True, via

    # -- reading ----------------------------------------------------------------------------------

    def receipt_of(self, job_id: str) -> str | None:
        """The verification receipt of an ended job's own exit, if one was stored."""
        job = self.jobs.get(job_id)
        if job is not None and job.receipt_id:
            return job.receipt_id
        row = self.row(job_id)
        return row["receipt_id"] if row is not None else None

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def row(self, job_id: str) -> Any:
        rows = self.store.query("SELECT * FROM jobs WHERE id = ? AND session_id = ?", (job_id, self.session_id))
        return rows[0] if rows else None

    def rows(self) -> list[Any]:
        return self.store.query("SELECT * FROM jobs WHERE session_id = ? ORDER BY started_at", (self.session_id,))

    async def cancel(self, job: Job, reason: str = "cancel") -> StopResult:
        res = await job.running.stop(reason)
        job.stop_result = res
        self.store.add_event(
            self.session_id,
            "job-stop",
            {"job": job.id, "reason": reason, "signals": list(res.signals), "groupExited": res.group_exited},
            call_seq=job.call_seq,
        )
        if res.group_exited:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.finished.wait(), limits.BACKGROUND_CAPTURE_DRAIN_S + 1)
        return res

    async def aclose(self) -> None:
        """The session ends: stop every active job's group and record its end."""
        if self._closed:
            return
        self._closed = True
        active = [j for j in self.jobs.values() if j.active]
        self.stopped_at_close = active
        if active:
            await asyncio.gather(*(self._end(j) for j in active), return_exceptions=True)
        for j in self.jobs.values():
            if j.watcher is not None and not j.watcher.done():
                j.watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await j.watcher
            self._finish(j)
        await asyncio.gather(*(j.running.close() for j in self.jobs.values()), return_exceptions=True)

    def exit_notes(self) -> list[str]:
        """One line per job the session's end stopped, for the person whose command just ended:
        a job lives only as long as the process that holds it."""
        return [
            f"zuno: background job {j.id} ({label_line(j.label, 80)}) was still running when this command ended, "
            f"so it was stopped (status: {j.status}). A job lives only as long as the zuno process that started it: "
            "keep one process (zuno steps, zuno mcp) open while it runs. Its end is reported to the session's next "
            "step."
            for j in self.stopped_at_close
        ]

    async def _end(self, job: Job) -> None:
        res = await job.running.stop("session-end", grace=limits.BACKGROUND_SESSION_END_GRACE_S)
        job.stop_result = res
        self.store.add_event(
            self.session_id,
            "job-stop",
            {"job": job.id, "reason": "session-end", "signals": list(res.signals), "groupExited": res.group_exited},
            call_seq=job.call_seq,
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(job.finished.wait(), limits.BACKGROUND_CAPTURE_DRAIN_S + 1)


def cut_of(row: Any) -> list[tuple[int, str]] | None:
    """A job row's ``capture_cut``: the processes found holding its output at its end, or None."""
    try:
        raw = row["capture_cut"]
    except (IndexError, KeyError):
        return None
    if raw is None:
        return None
    try:
        return [(int(p), str(n)) for p, n in json.loads(raw)]
    except (ValueError, TypeError):
        return []

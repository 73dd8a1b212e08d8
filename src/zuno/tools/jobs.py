"""The `chord` profile's job tools: job_output, job_list, job_kill.

* ``job_output``: a job's output since the last read, ending with a ``[status: …]`` line.
  ``wait``: ``none`` (what is there now), ``output`` (until new output), ``exit`` (until the job
  ends), each capped at 30 s. A timed-out wait is not an error: a ``[notice]`` line says whether
  the exit wait timed out or was cancelled and how long the job has been quiet. Repeated
  non-blocking reads with no new output are flagged as polling (the 2nd), then refused (the 4th).
  Terminal escape sequences are removed. New output over 16 KiB: a short preview and the log path.
* ``job_list``: id, status, elapsed, quiet time, label, time left to the deadline; active jobs
  only unless ``include_finished``.
* ``job_kill``: stop a job's whole process group (``reason`` recorded); it signals only while a
  member recorded at the command's exit is provably still in the group, and otherwise says it
  could not confirm the group exited.

The jobs table's migration lives here (``MIGRATIONS``), shared with ``bg``.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from zuno import limits
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind, Declarations
from zuno.jobs import MIGRATIONS as JOB_MIGRATIONS
from zuno.jobs import Job, JobManager, fmt_s, label_line
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.quote import quote
from zuno.windows import _skip_continuations, _utf8_cut

MIGRATIONS = JOB_MIGRATIONS

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS / SOS / PM / APC strings
    r"|\x1b[ -/]*[0-~]"  # other two-byte escapes (charset selection, keypad modes, ...)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)


def strip_escapes(text: str) -> str:
    """Remove terminal escape sequences (colour, cursor movement, titles), keep the text."""
    return _ESCAPES.sub("", text)


def _find(jobs: JobManager, job_id: str) -> tuple[Job | None, Any]:
    job = jobs.get(job_id)
    row = jobs.row(job_id)
    if job is None and row is None:
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument 'job_id': {quote(job_id)} is not a job of this session. Use job_list to see them.",
        )
    return job, row


class JobOutputArgs(ToolArgs):
    job_id: str = Field(description="The job's id.")
    wait: Literal["none", "output", "exit"] = Field(
        "none", description="none: what is there now. output: until new output. exit: until the job ends. Max 30 s."
    )
    timeout_ms: int | None = Field(None, ge=0, description="How long a wait may take; default and maximum 30000.")


class JobOutputTool(Tool):
    name = "job_output"
    description = (
        "A background job's output since the last read, ending with a [status: …] line. wait: none (default), "
        "output (until new output) or exit (until the job ends), each capped at 30 s. Do not poll: repeated reads "
        "with no new output are refused; completion arrives by itself."
    )
    Args = JobOutputArgs
    declarations = READ_ONLY_PARALLEL

    def subject(self, args: ToolArgs) -> str | None:
        return getattr(args, "job_id", None)

    async def run(self, ctx: ToolContext, args: JobOutputArgs) -> ToolOutput:
        jobs = JobManager.of(ctx)
        job, row = _find(jobs, args.job_id)
        if job is None:
            return self._from_row(jobs, row)
        cap = limits.JOB_OUTPUT_WAIT_MAX_S
        timeout = cap if args.timeout_ms is None else min(args.timeout_ms, cap * 1000) / 1000
        async with job.read_lock:
            notice = ""
            cancelled = False
            t0 = time.monotonic()
            try:
                if args.wait == "output" and job.active:
                    if not await job.running.wait_output(job.read_cursor, timeout) and job.active:
                        notice = (
                            f"[notice] the output wait timed out after {fmt_s(time.monotonic() - t0)} with no new "
                            f"output; the job is running, quiet for {fmt_s(time.time() - job.running.last_output_at)}"
                        )
                elif args.wait == "exit" and job.active:
                    try:
                        await asyncio.wait_for(job.finished.wait(), timeout)
                    except TimeoutError:
                        notice = (
                            f"[notice] the exit wait timed out after {fmt_s(time.monotonic() - t0)} (capped at "
                            f"{fmt_s(cap)}); the job is running, quiet for "
                            f"{fmt_s(time.time() - job.running.last_output_at)}"
                        )
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                cancelled = True
                notice = (
                    f"[notice] the {args.wait} wait was cancelled after {fmt_s(time.monotonic() - t0)}; the job is "
                    f"running, quiet for {fmt_s(time.time() - job.running.last_output_at)}"
                )
            total = job.running.total_written
            if job.active and total > job.read_cursor:
                # A character the command is still writing waits for its last bytes: shown now,
                # its two halves would each read as U+FFFD.
                tail = job.running.read_range(max(job.read_cursor, total - 3), total)
                total -= len(tail) - _utf8_cut(tail)
            new = total - job.read_cursor
            polling = ""
            if new == 0 and args.wait == "none" and job.active:
                job.empty_polls += 1
                if job.empty_polls >= limits.JOB_POLL_REFUSE_AFTER:
                    raise Refused(
                        BlockKind.denied,
                        f"job_output refused: {job.empty_polls} reads of {job.id} in a row found no new output "
                        "(polling). The job's completion arrives by itself as a notice. Do other work, or call "
                        'job_output with wait: "output" or "exit" (capped at 30 s) if this step depends on it.',
                        job_id=job.id,
                        polling=True,
                    )
                if job.empty_polls >= limits.JOB_POLL_FLAG_AFTER:
                    polling = (
                        f"[notice] polling: {job.empty_polls} reads in a row found no new output. The completion "
                        'arrives as a notice; use wait: "exit" instead, or do other work. Further empty reads are '
                        "refused."
                    )
            else:
                job.empty_polls = 0
            body = self._body(jobs, job, job.read_cursor, total)
            job.read_cursor = total
            ended = not job.active
            meta: dict[str, Any] = {**job.facts(), "newBytes": new, "from": total - new}
            if polling:
                meta["polling"] = job.empty_polls
            tail = job.status_line()
            if ended:
                claimed, how = jobs.claim_completion(job.id, "job_output")
                meta["completion"] = {"deliveredHere": claimed, "how": how}
                if job.receipt_id:
                    meta["receiptId"] = job.receipt_id
                    tail += f"\n[verification {job.receipt_id}]"
            text = "\n".join(x for x in (notice, polling, body) if x)
            return ToolOutput(text=text, tail=tail, metadata=meta, cancelled=cancelled, bounded=True)

    @staticmethod
    def _body(jobs: JobManager, job: Job, start: int, total: int) -> str:
        new = total - start
        if new <= 0:
            return "(no new output)"
        if new > limits.BACKGROUND_PREVIEW_LIMIT:
            data = job.running.read_range(total - limits.BACKGROUND_PREVIEW_BYTES, total)
            data = data[_skip_continuations(data) :]  # start on a character, not inside one
            return (
                f"[{new} new bytes, over {limits.BACKGROUND_PREVIEW_LIMIT}: the last {len(data)} are shown; all of "
                f"it is in {jobs.display(job.log_path)} from byte {start} — read or search the log instead of "
                "re-running]\n" + strip_escapes(data.decode("utf-8", "replace"))
            )
        return strip_escapes(job.running.read_range(start, total).decode("utf-8", "replace"))

    @staticmethod
    def _from_row(jobs: JobManager, row: Any) -> ToolOutput:
        """A job from an earlier process of this session: its log is all that is left, and what
        was read of it then is not known here, so its output is shown from the start (the same
        16 KiB preview rule)."""
        log = Path(row["log_path"])
        shown = jobs.display(log)
        try:
            with open(log, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > limits.BACKGROUND_PREVIEW_LIMIT:
                    f.seek(size - limits.BACKGROUND_PREVIEW_BYTES)
                data = f.read(limits.BACKGROUND_PREVIEW_LIMIT)
        except OSError as e:
            body = f"its log {shown} cannot be read ({e.strerror})."
            size = None
        else:
            if size > limits.BACKGROUND_PREVIEW_LIMIT:
                data = data[_skip_continuations(data) :]
                body = (
                    f"[{size} bytes, over {limits.BACKGROUND_PREVIEW_LIMIT}: the last {len(data)} are shown; all of "
                    f"it is in {shown} — read or search the log instead of re-running]\n"
                    + strip_escapes(data.decode("utf-8", "replace"))
                )
            else:
                body = strip_escapes(data.decode("utf-8", "replace")) if data else "(no output)"
        tail = f"[status: {row['status']}]"
        if row["receipt_id"]:
            tail += f"\n[verification {row['receipt_id']}]"
        claimed, how = jobs.claim_completion(row["id"], "job_output")
        return ToolOutput(
            text=f"[{row['id']} belonged to an earlier process of this session; its output, read from {shown}]\n"
            + body,
            tail=tail,
            bounded=True,
            metadata={
                "job_id": row["id"],
                "status": row["status"],
                "logPath": row["log_path"],
                "totalWritten": size,
                "completion": {"deliveredHere": claimed, "how": how},
                **({"receiptId": row["receipt_id"]} if row["receipt_id"] else {}),
            },
        )


class JobListArgs(ToolArgs):
    include_finished: bool = Field(False, description="Also list jobs that have ended.")


class JobListTool(Tool):
    name = "job_list"
    description = (
        "Background jobs you may read or stop: id, status, elapsed, quiet time, label, time left to the deadline. "
        "Active jobs only unless include_finished is true."
    )
    Args = JobListArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: JobListArgs) -> ToolOutput:
        jobs = JobManager.of(ctx)
        now = time.time()
        lines, facts = [], []
        for r in jobs.rows():
            job = jobs.get(r["id"])
            active = job is not None and job.active
            if not active and not args.include_finished:
                continue
            if job is not None:
                f = job.facts()
                quiet = fmt_s(now - job.running.last_output_at)
                status = job.status
            else:
                f = {"job_id": r["id"], "status": r["status"], "label": r["label"]}
                quiet = "-"
                status = r["status"]
            end = r["ended_at"] or now
            deadline = "-" if r["deadline_at"] is None or not active else fmt_s(r["deadline_at"] - now)
            facts.append(f)
            lines.append(
                f"{r['id']}  {status:<11} elapsed {fmt_s(end - r['started_at']):>7}  quiet {quiet:>7}  "
                f"deadline {deadline:>7}  {label_line(r['label'])}"
            )
        if not lines:
            text = "No active jobs." + ("" if args.include_finished else " (include_finished: true lists ended ones.)")
        else:
            text = "\n".join(lines)
        return ToolOutput(text=text, metadata={"jobs": facts})


class JobKillArgs(ToolArgs):
    job_id: str = Field(description="The job to stop.")
    reason: str | None = Field(None, description="Why; recorded with the stop.")


class JobKillTool(Tool):
    name = "job_kill"
    description = (
        "Stop a background job: its whole process group, SIGTERM then SIGKILL. Signals only while a process recorded "
        "as a member is provably still in the group."
    )
    Args = JobKillArgs
    declarations = Declarations()

    def subject(self, args: ToolArgs) -> str | None:
        return getattr(args, "job_id", None)

    async def run(self, ctx: ToolContext, args: JobKillArgs) -> ToolOutput:
        jobs = JobManager.of(ctx)
        job, row = _find(jobs, args.job_id)
        if job is None or not job.active:
            status = job.status if job is not None else row["status"]
            return ToolOutput(
                text=f"{args.job_id} had already ended ({status}); nothing was signalled.",
                tail=job.status_line() if job is not None else f"[status: {status}]",
                metadata={"job_id": args.job_id, "status": status, "signalled": False},
            )
        res = await jobs.cancel(job, "kill")
        meta = {
            **job.facts(),
            "signalled": res.signalled,
            "signals": list(res.signals),
            "groupExited": res.group_exited,
            "reason": args.reason,
        }
        ctx.store.add_event(ctx.session_id, "job-kill", {"job": job.id, "reason": args.reason}, call_seq=ctx.call_seq)
        if not res.group_exited:
            out = ToolOutput.uncertain(
                f"[uncertain] {job.id}: {res.message}. Inspect its processes (pgid {job.running.pgid}) before relying "
                "on it having stopped.",
                **meta,
            )
            out.tail = job.status_line()
            return out
        return ToolOutput(
            text=f"{job.id} stopped: {res.message}." + (f" Reason: {args.reason}." if args.reason else ""),
            tail=job.status_line(),
            metadata=meta,
        )


def register(registry: Registry) -> None:
    registry.add("job_output", JobOutputTool, profiles=("chord",))
    registry.add("job_list", JobListTool, profiles=("chord",))
    registry.add("job_kill", JobKillTool, profiles=("chord",))

"""bg: inspect or cancel background commands, and page output kept out of the transcript.

Actions: ``list``, ``output``, ``wait`` and ``artifact`` are read-only; ``cancel`` is
side-effecting (the tool classifies from the validated action; an absent or unknown action
fails closed as SideEffecting).

* ``output`` / ``wait`` read a background execution's output by ``taskID``, one window at a
  time: without a cursor the newest window, ending at ``totalWritten``; ``windowFrom`` /
  ``hasEarlier`` page back, ``cursor`` / ``hasMore`` forward. A cursor older than the 2 MiB kept in
  memory is served from the log file and ``fromDisk`` says so. ``wait`` first waits for the job to
  end, at most 60 s per call. A read that sees the job's end delivers its completion (once: the
  queued notice is withdrawn).
* ``artifact`` reads a window of output a size limit withheld, by ``outputPath``, from byte 0.

Retrieval never re-runs anything and never passes through the output limits (a window is
already bounded).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from zuno import limits, safefs
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind, Effect
from zuno.jobs import Job, JobManager, exit_text, fmt_s, label_line
from zuno.jobs.manager import cut_of
from zuno.jobs.status import cut_text
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.quote import quote
from zuno.windows import Window, read_window, read_window_fd


class BgArgs(ToolArgs):
    action: Literal["list", "output", "wait", "cancel", "artifact"] = Field(
        description="list: this session's background executions; output: a window of taskID's output (no cursor: "
        "the newest); wait: for its end (max 60 s), then a window; cancel: stop its process group; artifact: a "
        "window of withheld outputPath (no cursor: from 0)"
    )
    taskID: str | None = Field(None, description="output, wait, cancel")
    outputPath: str | None = Field(None, description="artifact: the path a notice named")
    cursor: int | None = Field(
        None,
        ge=0,
        description="Absolute byte offset",
    )
    limit: int | None = Field(None, ge=1, description="Window bytes (default 16384, clamped to 51200)")
    timeout_ms: int | None = Field(None, ge=0, description="wait: default and max 60000")
    reason: str | None = Field(None, description="cancel: why")


def _b(v: bool) -> str:
    return str(v).lower()


class BgTool(Tool):
    name = "bg"
    description = (
        "Background commands, and withheld output, in windows: pass the returned cursor back to page on. wait "
        "only when this step needs the result: completion arrives as a notice."
    )
    Args = BgArgs
    declarations = READ_ONLY_PARALLEL
    action_effects: ClassVar[Mapping[str, Effect]] = {
        "artifact": Effect.ReadOnly,
        "list": Effect.ReadOnly,
        "output": Effect.ReadOnly,
        "wait": Effect.ReadOnly,
        "cancel": Effect.SideEffecting,
    }

    def subject(self, args: ToolArgs) -> str | None:
        a: Any = args
        return a.taskID or a.outputPath

    async def run(self, ctx: ToolContext, args: BgArgs) -> ToolOutput:
        if args.action == "artifact":
            return await self.artifact(ctx, args)
        jobs = JobManager.of(ctx)
        if args.action == "list":
            return self.list(jobs)
        if not args.taskID:
            mixed = (
                ' outputPath names output a size limit withheld: read it with action "artifact".'
                if args.outputPath and args.action in ("output", "wait")
                else ""
            )
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'taskID' is required for action \"{args.action}\": pass the id a background start "
                f'returned, or use action "list".{mixed}',
            )
        job = jobs.get(args.taskID)
        row = jobs.row(args.taskID)
        if job is None and row is None:
            mixed = (
                ' It looks like a path: withheld output is read with action "artifact" and outputPath.'
                if "/" in args.taskID
                else ""
            )
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'taskID': {quote(args.taskID)} is not a background execution of this session. "
                f'Use action "list" to see them.{mixed}',
            )
        if args.action == "cancel":
            return await self.cancel(jobs, job, row, args)
        waited: str | None = None
        cancelled = False
        if args.action == "wait" and job is not None and job.active:
            cap = limits.BG_WAIT_MAX_S
            timeout = cap if args.timeout_ms is None else min(args.timeout_ms, cap * 1000) / 1000
            t0 = time.monotonic()
            try:
                await asyncio.wait_for(job.finished.wait(), timeout)
            except TimeoutError:
                quiet = fmt_s(time.time() - job.running.last_output_at)
                waited = (
                    f"the wait timed out after {fmt_s(time.monotonic() - t0)} (each bg wait is capped at "
                    f"{fmt_s(cap)}); the job is still running, quiet for {quiet}"
                )
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                cancelled = True
                waited = f"the wait was cancelled after {fmt_s(time.monotonic() - t0)}; the job is still running"
        out = self.window(jobs, job, row, args, via=f"bg {args.action}")
        if waited:
            out.head = f"[notice] {waited}\n{out.head}"
            out.metadata["wait"] = "cancelled" if cancelled else "timed out"
        out.cancelled = cancelled
        return out

    # -- actions -------------------------------------------------------------------------------

    def list(self, jobs: JobManager) -> ToolOutput:
        rows = jobs.rows()
        if not rows:
            return ToolOutput(text="No background executions in this session.", metadata={"jobs": []})
        lines, facts = [], []
        now = time.time()
        for r in rows:
            job = jobs.get(r["id"])
            if job is not None:
                f = job.facts()
                status, total = job.status, job.running.total_written
            else:
                f = {k: r[k] for k in ("status", "label", "purpose", "log_path", "total_written")}
                f["taskID"] = r["id"]
                status, total = r["status"], r["total_written"]
            facts.append(f)
            end = r["ended_at"] or now
            purpose = f"; backgroundPurpose {r['purpose']}" if r["purpose"] else ""
            label = label_line(r["label"])
            took = fmt_s(end - r["started_at"])
            lines.append(f"{r['id']}  {status:<11} {took:>8}  {total:>10} bytes  {label}{purpose}")
        return ToolOutput(text="\n".join(lines), metadata={"jobs": facts})

    def window(self, jobs: JobManager, job: Job | None, row: Any, args: BgArgs, *, via: str) -> ToolOutput:
        if job is not None:
            w, from_disk = job.running.window(args.cursor, args.limit, from_end=True)
            ended = not job.active
            facts = {**job.facts(), "memoryFrom": job.running.memory_start}
            status = job.status
            info_text = exit_text(job.running.exit) if job.running.exit else "its process is running"
            purpose = job.purpose
        else:
            path = Path(row["log_path"])
            try:
                w = read_window(path, args.cursor, args.limit, from_end=True)
            except OSError as e:
                return ToolOutput.failure(f"the log of {row['id']} ({path}) cannot be read ({e.strerror}).")
            from_disk, ended, status = True, row["ended_at"] is not None, row["status"]
            facts = {
                "taskID": row["id"],
                "status": status,
                "label": row["label"],
                "logPath": row["log_path"],
                "memoryFrom": None,
            }
            info_text = status
            purpose = row["purpose"]
        head = _past_end(args.cursor, w) + self._head(facts["taskID"], status, info_text, w, from_disk, purpose)
        meta: dict[str, Any] = {**facts, **w.facts(), "fromDisk": from_disk}
        if args.cursor is not None and args.cursor > w.total:
            meta["cursorPastEnd"] = args.cursor
        tail = ""
        if ended:
            claimed, how = jobs.claim_completion(facts["taskID"], via)
            meta["completion"] = {"deliveredHere": claimed, "how": how}
            tail = "[completion delivered here; no separate notice will follow]" if claimed else f"[completion {how}]"
            if purpose == "remoteObserver":
                tail += (
                    " [backgroundPurpose remoteObserver: refresh the remote system's authoritative state before "
                    "claiming the remote work completed]"
                )
            cut = job.capture_cut if job is not None else cut_of(row)
            if cut is not None:
                meta["outputCut"] = {"holders": [{"pid": p, "name": n} for p, n in cut]}
                tail += f"\n[{cut_text(cut)}]"
            receipt_id = jobs.receipt_of(facts["taskID"])
            if receipt_id:
                meta["receiptId"] = receipt_id
                tail += f"\n[verification {receipt_id}]"
        return ToolOutput(text=w.text(), raw=w.data, head=head, tail=tail, bounded=True, metadata=meta)

    @staticmethod
    def _head(job_id: str, status: str, info: str, w: Window, from_disk: bool, purpose: str | None) -> str:
        p = f"; backgroundPurpose {purpose}" if purpose else ""
        return (
            f"[{job_id}: {status} ({info}){p}; bytes {w.window_from}-{w.cursor} of {w.total}; "
            f"hasMore: {_b(w.has_more)}" + (f", next cursor: {w.cursor}" if w.has_more else "") + f"; "
            f"hasEarlier: {_b(w.has_earlier)}" + (f", windowFrom: {w.window_from}" if w.has_earlier else "") + f"; "
            f"fromDisk: {_b(from_disk)}]"
        )

    async def cancel(self, jobs: JobManager, job: Job | None, row: Any, args: BgArgs) -> ToolOutput:
        if job is None or not job.active:
            status = job.status if job is not None else row["status"]
            return ToolOutput(
                text=f"{args.taskID} had already ended ({status}); nothing was signalled.",
                metadata={"taskID": args.taskID, "status": status, "signalled": False},
            )
        res = await jobs.cancel(job, "cancel")
        meta = {
            **job.facts(),
            "signalled": res.signalled,
            "signals": list(res.signals),
            "groupExited": res.group_exited,
        }
        if args.reason:
            meta["reason"] = args.reason
        if not res.group_exited:
            return ToolOutput.uncertain(
                f"[uncertain] {args.taskID}: {res.message}. Inspect its processes (pgid {job.running.pgid}) "
                "before relying on it having stopped.",
                **meta,
            )
        return ToolOutput(
            text=f"{args.taskID} cancelled: {res.message}; {exit_text(job.running.exit)}. "
            f"Its output stays readable with bg output.",
            metadata=meta,
        )

    async def artifact(self, ctx: ToolContext, args: BgArgs) -> ToolOutput:
        if not args.outputPath:
            mixed = (
                ' taskID names a background execution: read its output with action "output" (or "wait").'
                if args.taskID
                else ""
            )
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'outputPath' is required for action \"artifact\": pass the path the notice named.{mixed}",
            )
        path, where = ctx.locate(args.outputPath, field="outputPath")
        shown = ctx.workspace.display(path)
        if ctx.store.artifact(shown) is None:
            job = next((r["id"] for r in JobManager.of(ctx).rows() if Path(r["log_path"]) == path), None)
            if job:
                hint = f' It is the log of background job {job}: read it with action "output", taskID "{job}".'
            elif path.is_relative_to(ctx.workspace.state_dir / "logs"):
                hint = f' It is a command\'s capture log: read it with read {{"path": {json.dumps(shown)}}}.'
            else:
                hint = ""
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'outputPath': {quote(args.outputPath)} is not an artifact Zuno saved. "
                f"Use the outputPath from a withheld-output notice (metadata.withheldOutput.outputPath).{hint}",
            )
        try:
            w = await asyncio.to_thread(_artifact_window, where, args.cursor, args.limit)
        except OSError as e:
            return ToolOutput.failure(f"artifact {shown} cannot be read ({e.strerror}); it may have been removed.")
        head = _past_end(args.cursor, w) + (
            f"[artifact {shown}: bytes {w.window_from}-{w.cursor} of {w.total}; "
            f"hasMore: {_b(w.has_more)}"
            + (f", next cursor: {w.cursor}" if w.has_more else "")
            + f"; hasEarlier: {_b(w.has_earlier)}]"
        )
        return ToolOutput(
            text=w.text(),
            head=head,
            raw=w.data,
            bounded=True,
            metadata={"outputPath": shown, **w.facts()}
            | ({"cursorPastEnd": args.cursor} if args.cursor is not None and args.cursor > w.total else {}),
        )


def _past_end(cursor: int | None, w: Window) -> str:
    """A notice when the cursor asked for lies past the last byte: the window is empty, at the end."""
    if cursor is None or cursor <= w.total:
        return ""
    return (
        f"[notice] cursor {cursor} is past the end ({w.total} bytes written so far): the window is empty and "
        f"starts at {w.total}; page with the cursor a read returns, or omit it for the newest window\n"
    )


def _artifact_window(where: safefs.Target, cursor: int | None, limit: int | None) -> Window:
    """One window of a saved artifact, opened without following a link or waiting on a FIFO."""
    fd = safefs.open_regular(where)
    try:
        return read_window_fd(fd, cursor, limit)
    finally:
        os.close(fd)


def register(registry: Registry) -> None:
    registry.add("bg", BgTool, profiles=("zuno",))

"""The shell tool's result: what a finished (or promoted) command's exit status proves, its
output window, the verification receipt and the metadata every client reads. See tool.py for
running the command; the receipt of a background job's own exit is here too."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.declarations import Outcome
from zuno.jobs import Job
from zuno.process import ExitInfo, RunningCommand, StopResult
from zuno.tool import ToolContext, ToolOutput
from zuno.tools.shell import preview
from zuno.tools.shell.analysis import Analysis
from zuno.tools.shell.policy import Authority, Plan
from zuno.tools.shell.receipts import Receipt, authority_of, limitation_dicts, new_receipt_id, save_receipt

if TYPE_CHECKING:
    from zuno.tools.shell.tool import ShellArgs


@dataclass
class Run:
    """How a foreground run ended, as the result reads it."""

    info: ExitInfo | None
    timed_out: bool = False
    cancelled: bool = False
    exited_before_cancel: bool = False
    stop: StopResult | None = None
    promote: str | None = None  # why the command became a background job


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def command_result(
    ctx: ToolContext,
    args: ShellArgs,
    the_plan: Plan,
    reading: Analysis,
    run: Run,
    running: RunningCommand,
    *,
    workdir: Path,
    raw: bytes | None,
    raw_path: Path | None,
    total: int,
    changed: list[str],
    started: float,
    ended: float,
    timeout_ms: int,
    preflight_report: dict[str, Any] | None,
    job: Job | None = None,
) -> ToolOutput:
    info = run.info
    code = info.returncode if info else None
    sig = info.signal if info else None
    lims = [*the_plan.limitations, *reading.limitations]
    claimed = authority_of(the_plan.authority, lims)
    if args.exitPolicy == "all":
        decided_by = "every statement (errexit: the first failing command ends the script)"
    elif len(reading.statements) > 1:
        decided_by = (
            f"the last statement `{reading.last_statement}`; the statuses of the {len(reading.statements) - 1} "
            'statement(s) before it are not checked (use exitPolicy "all" to have them count)'
        )
    else:
        decided_by = "the whole command"
    if the_plan.policy == "last" and args.exitPolicy != "all":
        decided_by += "; within a pipeline only its last stage"

    head = ""
    not_proven: list[str] = []
    outcome: Outcome
    decision: str
    authority = claimed
    guard = info.guard_diagnostic if info else None
    killed_by = info.killed_by if info else None

    def nothing(reason: str) -> None:
        nonlocal decision, authority
        decision = "nothing"
        authority = Authority.unknown
        not_proven.append(reason)

    decision = "passed" if code == 0 else "failed"
    if job is not None and info is None:
        outcome = Outcome.ok
        nothing(
            f"the command is still running as background job {job.id} ({run.promote}): this result decides "
            "nothing; the job's completion reports its exit status"
        )
    elif info is None:
        outcome = Outcome.uncertain
        nothing("the command's exit could not be observed after it was stopped; it decides nothing")
    elif guard is not None and code == 125 and info.never_started:
        outcome = Outcome.error
        nothing(
            "exit 125 is the guard's: it failed before the command was started (see its line in the output), "
            "so nothing ran that could decide anything"
        )
        head = "[not run: the guard reports exit 125: it failed before starting the command] Nothing ran."
    elif guard is not None and code == 125:
        outcome = Outcome.uncertain
        nothing(
            "exit 125 is the guard's own failure (see its line in the output): it says nothing about "
            "whether the command ran or what it changed"
        )
        head = (
            "[uncertain: the guard failed (exit 125)] Whether the command ran, and what it changed, is unknown. "
            "Inspect the real state it would have changed before anything else is decided; Zuno does not re-run "
            "it."
        )
    elif guard is not None and code in (126, 127):
        outcome = Outcome.error
        what = "could not be executed" if code == 126 else "was not found"
        nothing(f"exit {code} is the guard's: the program {what}, so nothing ran that could decide anything")
        head = f"[not run: the guard reports exit {code}: the program {what}]"
    elif not info.settled:
        outcome = Outcome.uncertain
        nothing(
            "the status could not be settled (the output capture broke after the process exited), so it is "
            "not a verdict anything may cite"
        )
        head = (
            "[uncertain: the status could not be settled] The command's output capture broke; its status decides "
            "nothing. Inspect the real state it would have changed before running it again."
        )
    elif killed_by == "ceiling":
        outcome = Outcome.uncertain
        nothing("the command reached its hard ceiling and was killed there rather than deciding anything")
        head = (
            "[uncertain: killed at the hard ceiling] It decided nothing; inspect the real state before any retry."
        )
    elif sig is not None:
        outcome = Outcome.error
        nothing(f"killed by signal {sig} ({_signame(sig)}): there is no exit code, so it decides nothing")
    else:
        outcome = Outcome.ok if code == 0 else Outcome.error

    if run.timed_out and killed_by == "ceiling":
        head = (
            f"[uncertain: killed at the hard ceiling] The command ran to the runtime's ceiling ({timeout_ms} ms; "
            "no timeout_ms of its own applied) and its whole process group was killed there. It decided nothing, "
            "and what it had already changed cannot be read off this result: inspect the real state it would "
            "have changed before running it again."
        )
    elif run.timed_out:
        outcome = Outcome.uncertain
        if decision != "nothing":
            nothing("the command was stopped at its timeout; a status seen after the stop decides nothing")
        else:
            not_proven.insert(0, "it was stopped at its timeout")
        head = (
            f"[uncertain: timed out] The command ran past its timeout ({timeout_ms} ms) and its whole process "
            "group was stopped. It decided nothing, and what it had already changed cannot be read off this "
            "result: inspect the real state it would have changed before running it again."
        )
    elif run.cancelled:
        verdict_stands = run.exited_before_cancel and decision != "nothing"
        if verdict_stands:
            head = (
                "[cancelled after the command had exited] The interrupt found the command already finished: "
                "its own exit status and verdict stand; nothing else changes."
            )
        else:
            outcome = Outcome.uncertain
            if decision != "nothing":
                nothing(
                    "the command was still running when the call was cancelled; a status seen after the stop "
                    "decides nothing"
                )
            head = (
                "[uncertain: cancelled while the command was running] The command decided nothing, and what it "
                "had already changed cannot be read off this result. Inspect the authoritative state it would "
                "have changed before anything is retried; Zuno does not re-run it."
            )

    if job is not None and info is not None:
        not_proven.append(
            f"members of its process group still run as background job {job.id}: what they do is not part of "
            "this status"
        )
    if run.stop is not None and not run.stop.group_exited:
        not_proven.append(f"the process group could not be confirmed gone: {run.stop.message}")

    receipt = Receipt(
        id=new_receipt_id(),
        command=args.command,
        interpreter=the_plan.interpreter,
        exitPolicy=args.exitPolicy,
        prologue=the_plan.prologue,
        workdir=ctx.workspace.display(workdir),
        exitCode=code,
        signal=sig,
        decision=decision,
        authority=str(authority),
        decidedBy=decided_by if decision != "nothing" else "nothing: " + not_proven[0],
        limitations=limitation_dicts(lims),
        notProven=not_proven,
        killedBy=killed_by or ("timeout" if run.timed_out else "cancel" if run.cancelled else None),
        guardDiagnostic=guard,
        cancelled=run.cancelled,
        timedOut=run.timed_out,
        session=ctx.session_id,
        callId=ctx.call_id,
        callSeq=ctx.call_seq,
        startedAt=started,
        endedAt=ended,
        durationMs=int((ended - started) * 1000),
    )
    save_receipt(ctx.store, receipt)

    tail = [receipt.line()]
    if changed:
        tail.append("[writtenPaths: " + ", ".join(changed[:20]) + (" …" if len(changed) > 20 else "") + "]")
    tail.append(f"[verification {receipt.id}]")
    metadata: dict[str, Any] = {
        "exitCode": code,
        "signal": sig,
        "decision": decision,
        "authority": str(authority),
        "receiptId": receipt.id,
        "receipt": receipt.as_dict(),
        "writtenPaths": changed,
        "interpreter": the_plan.interpreter,
        "exitPolicy": args.exitPolicy,
        "timeoutMs": timeout_ms,
        "totalWritten": total,
        "logPath": ctx.workspace.display(running.log_path),
        "durationMs": receipt.durationMs,
    }
    if run.cancelled:
        metadata["cancellation"] = "exited-before-cancel" if head.startswith("[cancelled") else "while-running"
    if run.stop is not None:
        metadata["stop"] = {"groupExited": run.stop.group_exited, "signals": list(run.stop.signals)}
    if preflight_report is not None:
        metadata["preflight"] = preflight_report
    if job is not None:
        bg = job.started_output(head)
        metadata.update(bg.metadata)
        metadata["writtenPathsSkipped"] = "promoted to the background: it may still be writing"
        return ToolOutput(
            text=bg.text,
            raw=bg.raw,
            outcome=outcome,
            head=bg.head,
            tail="\n".join([bg.tail, *tail]),
            bounded=bg.bounded,
            metadata=metadata,
        )
    if preview.wants_preview(ctx.config.profile, total):
        text, metadata["preview"] = preview.preview(running.log_path, total, metadata["logPath"])
        tail_text = "\n".join(tail)
        return ToolOutput(
            text,
            outcome=outcome,
            head=head,
            tail=tail_text,
            cancelled=run.cancelled,
            bounded=True,
            metadata=metadata,
        )
    if raw is not None:
        text = raw.decode("utf-8", "replace").removesuffix("\n") if raw else "(no output)"
    else:
        text = ""
    return ToolOutput(
        text=text,
        raw=raw if raw else (b"" if raw is not None else None),
        raw_path=raw_path,
        outcome=outcome,
        head=head,
        tail="\n".join(tail),
        cancelled=run.cancelled,
        metadata=metadata,
    )

def background_result(
    ctx: ToolContext,
    args: ShellArgs,
    the_plan: Plan,
    reading: Analysis,
    run: Run,
    job: Job,
    *,
    workdir: Path,
    started: float,
    ended: float,
    preflight: dict[str, Any] | None,
) -> ToolOutput:
    return command_result(
        ctx,
        args,
        the_plan,
        reading,
        run,
        job.running,
        workdir=workdir,
        raw=None,
        raw_path=None,
        total=job.running.total_written,
        changed=[],
        started=started,
        ended=ended,
        timeout_ms=int((job.deadline_at - job.started_at) * 1000) if job.deadline_at else 0,
        preflight_report=preflight,
        job=job,
    )


def job_receipt_hook(
    ctx: ToolContext, args: ShellArgs, the_plan: Plan, reading: Analysis, *, workdir: str
) -> Callable[[Job], str | None]:
    """The receipt of a background job's own exit, stored when the job ends and cited by its
    completion: the same authority rules as a foreground command, applied to the job's status."""
    store, session_id, call_id, call_seq = ctx.store, ctx.session_id, ctx.call_id, ctx.call_seq
    lims = [*the_plan.limitations, *reading.limitations]
    claimed = authority_of(the_plan.authority, lims)

    def on_end(job: Job) -> str | None:
        info = job.running.exit
        code = info.returncode if info else None
        sig = info.signal if info else None
        not_proven: list[str] = []
        if info is None:
            not_proven.append("the job's exit could not be observed (its process group was lost)")
        elif info.guard_diagnostic is not None and code == 125 and info.never_started:
            not_proven.append("exit 125 is the guard's: it failed before the command was started, so nothing ran")
        elif info.guard_diagnostic is not None and code == 125:
            not_proven.append("exit 125 is the guard's own failure: it says nothing about what the command did")
        elif info.guard_diagnostic is not None and code in (126, 127):
            not_proven.append(f"exit {code} is the guard's: the program never started")
        elif not info.settled:
            not_proven.append("the status could not be settled (the output capture broke after the process exited)")
        elif info.killed_by is not None:
            not_proven.append(f"the job was stopped ({info.killed_by}) rather than deciding anything")
        elif sig is not None:
            not_proven.append(f"killed by signal {sig} ({_signame(sig)}): there is no exit code")
        decision = "nothing" if not_proven else ("passed" if code == 0 else "failed")
        receipt = Receipt(
            id=new_receipt_id(),
            command=args.command,
            interpreter=the_plan.interpreter,
            exitPolicy=args.exitPolicy,
            prologue=the_plan.prologue,
            workdir=workdir,
            exitCode=code,
            signal=sig,
            decision=decision,
            authority=str(Authority.unknown if not_proven else claimed),
            decidedBy=("nothing: " + not_proven[0]) if not_proven else f"background job {job.id}'s own exit",
            limitations=limitation_dicts(lims),
            notProven=not_proven,
            killedBy=info.killed_by if info else None,
            guardDiagnostic=info.guard_diagnostic if info else None,
            session=session_id,
            callId=call_id,
            callSeq=call_seq,
            startedAt=job.started_at,
            endedAt=time.time(),
            durationMs=int((time.time() - job.started_at) * 1000),
        )
        save_receipt(store, receipt)
        return receipt.id

    return on_end

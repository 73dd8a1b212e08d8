"""The ``shell`` tool: run a command behind the guard, and say exactly what its exit status proves.

SideEffecting / Never / Exclusive on both profiles. Every result carries a verification receipt
(``[verification rcp_…]`` in the always-visible tail), stored durably. See policy.py (interpreters,
exitPolicy, authority), analysis.py (the syntax tree), receipts.py, env.py, preflight.py, written.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from zuno import limits
from zuno.declarations import BlockKind, Declarations, Outcome
from zuno.jobs import PROMOTED_LINGERING, PROMOTED_REQUESTED, PROMOTED_YIELD, Job, JobManager
from zuno.process import CommandSpec, ExitInfo, RunningCommand, StopResult, start
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.shell import preview, written
from zuno.tools.shell.analysis import Analysis, analyze
from zuno.tools.shell.env import EnvHookInfo, EnvHooks, build_environment
from zuno.tools.shell.execargs import check_exec
from zuno.tools.shell.policy import INTERPRETERS, Authority, Plan, find_interpreter, installed_interpreters, plan
from zuno.tools.shell.preflight import preflight
from zuno.tools.shell.receipts import Receipt, authority_of, limitation_dicts, new_receipt_id, save_receipt

LOGS_DIR = "logs"


class ShellArgs(ToolArgs):
    command: str = Field(min_length=1)
    exitPolicy: Literal["pipefail", "all", "last"] = Field(
        "pipefail",
        description="pipefail: a failing stage fails a pipeline; all: also a failing command; last: only the final "
        "stage decides (status derived)",
    )
    workdir: str | None = Field(None, description="Default: the workspace root")
    timeout_ms: int | None = Field(
        None,
        ge=0,
        le=limits.BACKGROUND_TIMEOUT_MAX_MS,
        description=f"Kill the process group after this many ms (foreground: default and max "
        f"{limits.SHELL_TIMEOUT_MAX_MS}; background: none by default). 0: none, but a foreground command that "
        "cannot become a job keeps the default",
    )
    interpreter: Literal["bash", "zsh", "ksh", "dash", "sh", "pwsh"] | None = Field(
        None,
        description="Default: config shell.interpreter. dash, sh: no pipefail (status derived)",
    )
    run_in_background: bool = Field(
        False,
        description="Start as a background job (completion arrives as a notice)",
    )
    yield_time_ms: int | None = Field(
        None,
        ge=0,
        le=limits.SHELL_TIMEOUT_MAX_MS,
        description=f"Becomes a background job if still running after this many ms (default "
        f"{limits.YIELD_TIME_DEFAULT_MS}; 0: never by time)",
    )
    backgroundPurpose: Literal["remoteObserver"] | None = Field(
        None,
        description="Only observes remote work (CI, deploy): refresh remote state before claiming it completed",
    )

    @model_validator(mode="after")
    def _foreground_timeout(self) -> ShellArgs:
        if not self.run_in_background and self.timeout_ms is not None and self.timeout_ms > limits.SHELL_TIMEOUT_MAX_MS:
            raise ValueError(
                f"timeout_ms {self.timeout_ms} is over the foreground maximum {limits.SHELL_TIMEOUT_MAX_MS}; give at "
                f"most {limits.SHELL_TIMEOUT_MAX_MS}, or run_in_background: true (at most "
                f"{limits.BACKGROUND_TIMEOUT_MAX_MS})"
            )
        return self


@dataclass
class _Run:
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


def _real(p: Path) -> Path:
    return Path(os.path.realpath(p))


_RELEASING: set[asyncio.Task[None]] = set()


def _release(running: RunningCommand) -> None:
    task = asyncio.get_running_loop().create_task(running.close())
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


class ShellTool(Tool):
    name = "shell"
    description = (
        "Run a command in its own process group (bash, `set -o pipefail`). Its verification receipt "
        "[verification rcp_…] says how far the exit code decides: authoritative, derived (a construct such as "
        "`|| true` or `set +e` weakens it) or unknown (killed, timed out, cancelled). Zuno never re-runs it: "
        "after a timeout or cancel, inspect the real state first. Each call is a new shell in the workspace root (or "
        "workdir): cd and exported variables do not carry over to the next call, and standard input is empty."
    )
    Args = ShellArgs
    declarations = Declarations()  # SideEffecting, Never, Exclusive

    async def run(self, ctx: ToolContext, args: ShellArgs) -> ToolOutput:
        cfg = ctx.config.shell
        interpreter = args.interpreter or cfg.interpreter
        workdir = self._workdir(ctx, args)
        hooks = ctx.services.get(EnvHooks, EnvHooks).hooks
        env = build_environment(
            cfg.env,
            hooks,
            EnvHookInfo(args.command, str(workdir), interpreter, ctx.session_id, ctx.call_id),
        )
        exe = find_interpreter(interpreter, env.get("PATH"))
        if exe is None:
            have = installed_interpreters(env.get("PATH"))
            raise Refused(
                BlockKind.unavailable,
                f"argument 'interpreter': {interpreter} is not installed here (not found on PATH). "
                f"Installed: {', '.join(have) or 'none'}. Choose one of those.",
            )
        the_plan = plan(interpreter, exe, args.exitPolicy, args.command)
        check_exec(args.command, the_plan.argv, env)
        reading = analyze(args.command, policy=args.exitPolicy, interpreter=interpreter)
        log_dir = ctx.workspace.ensure_state_dir() / LOGS_DIR / ctx.session_id
        default_cap = cfg.timeout_ms or limits.SHELL_TIMEOUT_DEFAULT_MS
        promotable = reading.promotable
        at_ceiling = False  # the deadline is the runtime's own cap, not one the call asked for
        if args.run_in_background:
            timeout_ms = args.timeout_ms or 0  # none when not given; 0 = none
        elif args.timeout_ms is None:
            timeout_ms, at_ceiling = default_cap, True
        else:
            timeout_ms = args.timeout_ms
        yield_ms = args.yield_time_ms if args.yield_time_ms is not None else limits.YIELD_TIME_DEFAULT_MS
        if not args.run_in_background and timeout_ms == 0 and (not promotable or yield_ms == 0):
            # 0 means no deadline only for a command that will be promoted by time; a foreground call
            # that cannot be promoted keeps the default cap.
            timeout_ms, at_ceiling = default_cap, True

        pre_report = None
        if reading.git:
            git = shutil.which("git", path=env.get("PATH"))
            if git is not None:
                pre_report = await self._preflight(
                    reading.git,
                    workspace=ctx.workspace,
                    workdir=workdir,
                    env=env,
                    git=git,
                    log_dir=log_dir / "preflight",
                    budget_s=cfg.preflight_budget_ms / 1000.0,
                )

        watched = written.candidates(ctx.workspace, workdir, reading.paths)
        before = written.observe(watched)
        started = time.time()
        spec = CommandSpec(the_plan.argv, workdir, env, log_dir, label=f"shell-{ctx.call_seq}")
        # Never lose the handle of a started command: a cancel during the start waits for it.
        starting = asyncio.ensure_future(start(spec))
        cancelled_early = False
        try:
            running = await asyncio.shield(starting)
        except asyncio.CancelledError:
            self._uncancel()
            running = await starting
            cancelled_early = True
        # run_in_background always yields a job (a command that already finished is a job that has
        # ended: its completion is delivered like any other), unless the guard could not run it.
        could_not_run = running.exit is not None and running.exit.guard_diagnostic is not None
        if args.run_in_background and not cancelled_early and not could_not_run:
            run = _Run(None, promote=PROMOTED_REQUESTED)
        else:
            run = await self._supervise(
                running,
                timeout_s=timeout_ms / 1000.0 if timeout_ms else None,
                # yield_time_ms 0 turns promotion by time off (a lingering group member still promotes)
                yield_s=yield_ms / 1000.0 if promotable and yield_ms > 0 else None,
                cancelled_early=cancelled_early,
                deadline_reason="ceiling" if at_ceiling else "timeout",
            )
        ended = time.time()
        pre = pre_report.as_dict() if pre_report else None
        if run.promote is not None:
            jobs = JobManager.of(ctx)
            job = jobs.adopt(
                running,
                label=args.command,
                command=args.command,
                purpose=args.backgroundPurpose,
                deadline_s=(timeout_ms / 1000.0)
                if (args.timeout_ms or args.run_in_background) and timeout_ms
                else None,
                call_seq=ctx.call_seq,
                promoted_because=run.promote,
            )
            job.on_end = _job_receipt_hook(ctx, args, the_plan, reading, workdir=ctx.workspace.display(workdir))
            return self._background_result(
                ctx, args, the_plan, reading, run, job, workdir=workdir, started=started, ended=ended, preflight=pre
            )
        total = running.total_written
        if total <= limits.SHELL_INLINE_READ_MAX_BYTES:
            raw: bytes | None = running.read_all()
            raw_path: Path | None = None
        else:
            raw, raw_path = None, running.log_path
        # The group is gone and every byte is read: releasing the reader (it ends when the guard
        # exits) need not hold the result up.
        _release(running)
        changed = written.changed(ctx.workspace, before)
        return self._result(
            ctx,
            args,
            the_plan,
            reading,
            run,
            running,
            workdir=workdir,
            raw=raw,
            raw_path=raw_path,
            total=total,
            changed=changed,
            started=started,
            ended=ended,
            timeout_ms=timeout_ms or default_cap,
            preflight_report=pre,
        )

    # -- running ---------------------------------------------------------------------------------

    @staticmethod
    def _workdir(ctx: ToolContext, args: ShellArgs) -> Path:
        if args.workdir is None:
            return ctx.workspace.root
        if "\0" in args.workdir:
            raise Refused(
                BlockKind.invalid_arguments,
                "argument 'workdir': contains a NUL byte, which no path can hold. Give a directory "
                "inside the workspace (or omit workdir to run at the root).",
                field="workdir",
            )
        p = ctx.workspace.resolve(args.workdir, field="workdir")
        if not p.is_dir():
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'workdir': {args.workdir!r} is not an existing directory. Give a directory inside the "
                "workspace (or omit workdir to run at the root).",
            )
        return p

    @staticmethod
    async def _preflight(calls: Any, **kw: Any) -> Any:
        try:
            return await preflight(calls, **kw)
        except asyncio.CancelledError:
            raise Refused(
                BlockKind.unavailable,
                "the call was cancelled during the pre-flight repository reads, so the repository state it depends "
                "on is unknown; it was not run.",
                cancelled=True,
            ) from None

    @staticmethod
    def _uncancel() -> None:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()

    async def _supervise(
        self,
        running: RunningCommand,
        *,
        timeout_s: float | None,
        yield_s: float | None,
        cancelled_early: bool = False,
        deadline_reason: str = "timeout",
    ) -> _Run:
        waits = [t for t in (timeout_s, yield_s) if t is not None]
        first = min(waits) if waits else None
        try:
            if cancelled_early:
                raise asyncio.CancelledError
            info = await running.wait(timeout=first)
        except asyncio.CancelledError:
            if not cancelled_early:
                self._uncancel()
            exited = running.exit is not None
            stop = (await self._stop(running, "cancel", hurry=True))[0] if running.group_alive() else None
            info = await self._settled_exit(running)
            return _Run(info, cancelled=True, exited_before_cancel=exited, stop=stop)
        if info is None:
            if yield_s is not None and (timeout_s is None or yield_s < timeout_s):
                return _Run(None, promote=PROMOTED_YIELD)
            stop, cancelled = await self._stop(running, deadline_reason)
            info = await self._settled_exit(running)
            return _Run(info, timed_out=True, stop=stop, cancelled=cancelled)
        if running.group_alive():
            # The command's own process exited while members of its process group still run: the
            # group becomes a background job (even with yield_time_ms 0), never leaked, never killed.
            return _Run(info, promote=PROMOTED_LINGERING)
        return _Run(info)

    async def _stop(self, running: RunningCommand, reason: str, *, hurry: bool = False) -> tuple[StopResult, bool]:
        """Stop the group (TERM, grace, KILL). A cancel during the stop is noted and hurries it to KILL;
        the stop itself always completes, so nothing is left running."""
        fut = asyncio.ensure_future(running.stop(reason, grace=0.0 if hurry else None))
        cancelled = False
        while True:
            try:
                return await asyncio.shield(fut), cancelled
            except asyncio.CancelledError:
                self._uncancel()
                if not cancelled:
                    cancelled = True
                    hurry_fut = asyncio.ensure_future(running.stop(reason, grace=0.0))
                    hurry_fut.add_done_callback(lambda f: f.exception())

    @staticmethod
    async def _settled_exit(running: RunningCommand) -> ExitInfo | None:
        fut = asyncio.ensure_future(running.wait(timeout=limits.PROCESS_KILL_WAIT_S))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            return await fut

    # -- the result ------------------------------------------------------------------------------

    def _result(
        self,
        ctx: ToolContext,
        args: ShellArgs,
        the_plan: Plan,
        reading: Analysis,
        run: _Run,
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

    def _background_result(
        self,
        ctx: ToolContext,
        args: ShellArgs,
        the_plan: Plan,
        reading: Analysis,
        run: _Run,
        job: Job,
        *,
        workdir: Path,
        started: float,
        ended: float,
        preflight: dict[str, Any] | None,
    ) -> ToolOutput:
        return self._result(
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


__all__ = ["INTERPRETERS", "ShellArgs", "ShellTool"]


def _job_receipt_hook(
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

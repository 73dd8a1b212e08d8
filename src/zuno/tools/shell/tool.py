"""The ``shell`` tool: run a command behind the guard, and say exactly what its exit status proves.

SideEffecting / Never / Exclusive on both profiles. Every result carries a verification receipt
(``[verification rcp_…]`` in the always-visible tail), stored durably. See policy.py (interpreters,
exitPolicy, authority), analysis.py (the syntax tree), result.py (what a result proves), receipts.py, env.py,
preflight.py, written.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from zuno import limits
from zuno.declarations import BlockKind, Declarations
from zuno.jobs import PROMOTED_LINGERING, PROMOTED_REQUESTED, PROMOTED_YIELD, JobManager
from zuno.process import CommandSpec, ExitInfo, RunningCommand, StopResult, start
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.shell import written
from zuno.tools.shell.analysis import analyze
from zuno.tools.shell.env import EnvHookInfo, EnvHooks, build_environment
from zuno.tools.shell.execargs import check_exec
from zuno.tools.shell.policy import INTERPRETERS, find_interpreter, installed_interpreters, plan
from zuno.tools.shell.preflight import preflight
from zuno.tools.shell.result import Run, background_result, command_result, job_receipt_hook

if TYPE_CHECKING:
    from zuno.workspace import Workspace

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

    def subject_forms(self, args: ToolArgs, workspace: Workspace) -> tuple[str, ...]:
        """The command, and each simple command in it as written and as the program it runs
        (``Analysis.invocations``): a rule on ``rm *`` also matches ``make && rm -rf build``,
        ``sudo /bin/rm x`` and ``bash -c 'rm x'``."""
        command = getattr(args, "command", None)
        if not isinstance(command, str):
            return super().subject_forms(args, workspace)
        interpreter = getattr(args, "interpreter", None) or "bash"
        reading = analyze(command, policy="pipefail", interpreter=interpreter)
        return tuple(dict.fromkeys([command, *reading.invocations]))

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
            run = Run(None, promote=PROMOTED_REQUESTED)
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
            job.on_end = job_receipt_hook(ctx, args, the_plan, reading, workdir=ctx.workspace.display(workdir))
            return background_result(
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
        return command_result(
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
    ) -> Run:
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
            return Run(info, cancelled=True, exited_before_cancel=exited, stop=stop)
        if info is None:
            if yield_s is not None and (timeout_s is None or yield_s < timeout_s):
                return Run(None, promote=PROMOTED_YIELD)
            stop, cancelled = await self._stop(running, deadline_reason)
            info = await self._settled_exit(running)
            return Run(info, timed_out=True, stop=stop, cancelled=cancelled)
        if running.group_alive():
            # The command's own process exited while members of its process group still run: the
            # group becomes a background job (even with yield_time_ms 0), never leaked, never killed.
            return Run(info, promote=PROMOTED_LINGERING)
        return Run(info)

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


__all__ = ["INTERPRETERS", "ShellArgs", "ShellTool"]

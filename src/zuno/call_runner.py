"""Running an admitted call: under the overlap bound (``concurrency.tool_calls``; an Exclusive call
needs none, it runs alone), in the task that runs its call, with bounded retries of a Safe call's
transient failures (``limits.SAFE_RETRY_*``), the tool's output put through the output limits,
and its settled entry and record made ready for the step's book. A cancellation settles the call
(cancelled, or uncertain when it may have changed something; never started when it had not).
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import Any

from zuno import limits
from zuno.admission import nothing_ran
from zuno.admitting import Admitted
from zuno.config import Config
from zuno.declarations import Concurrency, Effect, Outcome, Replay
from zuno.output import Artifacts, apply_limits
from zuno.records import CallRecord
from zuno.step_state import StepState
from zuno.store import Store
from zuno.store.calls import CallEntry
from zuno.tool import Refused, Services, ToolContext, ToolOutput, TransientError
from zuno.workspace import Workspace


async def _resume(coro: Any, yielded: Any) -> Any:
    """Drive, in this task, a coroutine the step's task started and that then waited on
    ``yielded``, as a task of its own would have (only for a tool that entered no deadline or
    cancel scope before that wait: ``Tool.starts_in_step_task``). Each future it waits on is
    awaited here; a cancellation of this task reaches it the way a task delivers one."""
    while True:
        error: BaseException | None = None
        try:
            if yielded is None:  # a bare yield: one turn of the loop
                await asyncio.sleep(0)
            elif asyncio.isfuture(yielded):
                yielded._asyncio_future_blocking = False  # taken, as a task takes it
                await yielded  # its outcome is the coroutine's to take, when it resumes
            else:
                error = RuntimeError(f"a tool's coroutine yielded {yielded!r}, not a future")
        except asyncio.CancelledError as e:
            if not (asyncio.isfuture(yielded) and yielded.cancelled()):
                error = e  # this task was cancelled: throw it in, as a task would
        except Exception:  # the future failed: the coroutine takes that from the future itself
            pass
        try:
            yielded = coro.send(None) if error is None else coro.throw(error)
        except StopIteration as e:
            return e.value


def _start_task(coro: Any) -> asyncio.Task[Any]:
    """The tool's own task, started eagerly where asyncio can (3.12+: a tool that finishes without
    waiting, a small read, is done before this returns and is never scheduled). Its first part
    must run in the task that runs the rest: a deadline (``asyncio.timeout``) or an anyio cancel
    scope (httpcore, the MCP SDK) belongs to the task it was entered in."""
    loop = asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return loop.create_task(coro)


@dataclass(kw_only=True, eq=False)
class CallRunner:
    """Runs the admitted calls of one session's steps: its workspace, store, config and services
    given to each tool through its ``ToolContext``, its artifacts for output over the limits
    (``artifact_reader`` is the tool the model reads them with), and the one overlap bound all its
    steps share."""

    session_id: str
    workspace: Workspace
    store: Store
    config: Config
    services: Services
    artifact_reader: str

    def __post_init__(self) -> None:
        self.artifacts = Artifacts(self.workspace, self.store)
        self._bound = asyncio.Semaphore(self.config.concurrency.tool_calls)

    def not_started(self, n: int, a: Admitted) -> tuple[CallEntry, CallRecord]:
        """A call the cancellation of its step kept from starting (its intent row, if it has one,
        is settled; otherwise it is written settled)."""
        text = "[cancelled] The step was cancelled before this call started. Nothing ran."
        entry = a.entry
        if entry is None or not entry.intent_written:
            entry = CallEntry(
                "settled",
                self.session_id,
                n,
                a.idx,
                a.call_id,
                a.name,
                a.arguments,
                a.decl.as_dict(),
                seq=entry.seq if entry is not None else 0,
            )
        entry.outcome = str(Outcome.error)
        entry.cancelled = True
        entry.text = text
        entry.metadata = {"notStarted": True}
        entry.started_at = entry.ended_at = None
        entry.event = ("call-settled", {"outcome": "error", "cancelled": True, "notStarted": True})
        rec = CallRecord(a.call_id, a.name, Outcome.error, None, True, text, {"notStarted": True}, a.decl, None, None)
        return entry, rec

    async def run_call(self, st: StepState, adm: Admitted, direct: bool = False) -> tuple[CallEntry, CallRecord]:
        if adm.decl.concurrency is Concurrency.Exclusive:
            return await self._run_admitted(st, adm, direct)
        try:
            await self._bound.acquire()
        except asyncio.CancelledError:
            if not direct:
                raise
            st.absorb()
            return self.not_started(st.n, adm)
        try:
            return await self._run_admitted(st, adm, direct)
        finally:
            self._bound.release()

    async def _run_admitted(self, st: StepState, adm: Admitted, direct: bool) -> tuple[CallEntry, CallRecord]:
        n = st.n
        entry = adm.entry
        if st.cancel_requested or entry is None:
            return self.not_started(n, adm)
        started = entry.started_at = time.time()
        seq = entry.seq
        ctx = ToolContext(
            workspace=self.workspace,
            store=self.store,
            config=self.config,
            session_id=self.session_id,
            step=n,
            call_id=adm.call_id,
            call_seq=seq,
            services=self.services,
            tool_name=adm.name,
            approved=adm.approved,
        )
        out = await self._invoke(ctx, adm, st, direct)
        ended = time.time()
        if isinstance(out, Refused):
            self.store.add_event(
                self.session_id,
                "dispatch-blocked",
                {"tool": adm.name, "block_kind": str(out.kind), "reason": out.message},
                step=n,
                call_seq=seq,
                call_id=adm.call_id,
            )
            text = f"[blocked: {out.kind}] {nothing_ran(out.message)}"
            rec = CallRecord(
                adm.call_id,
                adm.name,
                Outcome.blocked,
                out.kind,
                False,
                text,
                dict(out.metadata),
                adm.decl,
                started,
                ended,
            )
        else:
            try:
                text, metadata = apply_limits(
                    out,
                    limits=self.config.tool_output,
                    accept_large_output=adm.accept_large_output,
                    artifacts=self.artifacts,
                    session_id=self.session_id,
                    call_seq=seq,
                    call_id=adm.call_id,
                    artifact_reader=self.artifact_reader,
                )
            except OSError as e:
                text = f"[error] the output could not be saved ({e}); it is not shown because it is over the limits."
                metadata = dict(out.metadata)
                out.outcome = Outcome.error if out.outcome is Outcome.ok else out.outcome
            rec = CallRecord(
                adm.call_id,
                adm.name,
                out.outcome,
                None,
                out.cancelled,
                text,
                metadata,
                adm.decl,
                started,
                ended,
            )
        entry.outcome = str(rec.outcome)
        entry.block_kind = str(rec.block_kind) if rec.block_kind else None
        entry.cancelled = rec.cancelled
        entry.text = rec.text
        entry.metadata = rec.metadata
        entry.ended_at = ended
        entry.event = ("call-settled", {"outcome": entry.outcome, "cancelled": rec.cancelled})
        return entry, rec

    async def _invoke(self, ctx: ToolContext, adm: Admitted, st: StepState, direct: bool) -> ToolOutput | Refused:
        attempts = limits.SAFE_RETRY_ATTEMPTS if adm.decl.replay is Replay.Safe else 1
        task = asyncio.current_task()
        assert task is not None
        for i in range(attempts):
            if st.cancel_requested:  # (a retry after the step was asked to stop)
                return self._cancelled_output(adm)
            out, exc, cancelled = await self._run_tool(task, ctx, adm, st, direct)
            if cancelled:
                return self._cancelled_output(adm)
            if exc is None:
                if not isinstance(out, ToolOutput):
                    return ToolOutput.failure(f"tool {adm.name} returned {type(out).__name__}, not a ToolOutput.")
                return out
            if isinstance(exc, Refused):
                return exc
            if isinstance(exc, TransientError) and i + 1 < attempts and not st.cancel_requested:
                delay = limits.SAFE_RETRY_BACKOFF_S[min(i, len(limits.SAFE_RETRY_BACKOFF_S) - 1)]
                self.store.add_event(
                    self.session_id,
                    "call-retry",
                    {"tool": adm.name, "attempt": i + 2, "after_s": delay, "error": str(exc)},
                    step=ctx.step,
                    call_seq=ctx.call_seq,
                    call_id=adm.call_id,
                )
                base = task.cancelling()
                st.running[task] = 0
                try:
                    await asyncio.sleep(delay)
                except asyncio.CancelledError:
                    own = st.running.pop(task)
                    st.take_back(task, base, own, direct and task.cancelling() - base > own)
                    return self._cancelled_output(adm)
                st.running.pop(task)
                continue
            if isinstance(exc, TransientError):
                why = (
                    f"failed {attempts} times"
                    if attempts > 1
                    else "failed; its replay policy is Never, so it is not retried"
                )
                return ToolOutput.failure(f"[error] {adm.name} {why}: {exc}")
            return ToolOutput.failure(
                f"[error] {adm.name} failed inside the tool: {type(exc).__name__}: {exc}. "
                + (
                    "Nothing was changed by a read-only tool."
                    if adm.decl.effect is Effect.ReadOnly
                    else "Inspect the state it may have touched before retrying."
                )
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run_tool(
        self, task: asyncio.Task[Any], ctx: ToolContext, adm: Admitted, st: StepState, direct: bool
    ) -> tuple[Any, Exception | None, bool]:
        """Run the tool: (output, exception, cancelled). In a run of overlapping calls it runs in
        its call's task (which only the step cancels); a one-call run's tool runs in a task of its
        own that the step's task awaits (``_run_direct``)."""
        if direct:
            return await self._run_direct(ctx, adm, st)
        base = task.cancelling()
        st.running[task] = 0
        out: Any = None
        exc: Exception | None = None
        cancelled = False
        try:
            out = await adm.tool.run(ctx, adm.args)
        except asyncio.CancelledError:
            cancelled = True
        except Exception as e:
            exc = e
        st.take_back(task, base, st.running.pop(task), False)
        return out, exc, cancelled

    async def _run_direct(self, ctx: ToolContext, adm: Admitted, st: StepState) -> tuple[Any, Exception | None, bool]:
        """The tool of a one-call run, in a task of its own awaited by the step's task (on 3.11,
        a ``starts_in_step_task`` tool is started in the step's task and gets one only if it
        waits): a cancellation of the step's task from outside is the step's to absorb (the tool
        gets the step's cancel, never the caller's), even when a tool takes its own cancellation back."""
        coro = adm.tool.run(ctx, adm.args)
        if sys.version_info < (3, 12) and adm.tool.starts_in_step_task:
            # No eager tasks before 3.12: started here, a tool that finishes without waiting (a
            # small read) needs no task at all; one that waits goes on in a task of its own.
            try:
                yielded = coro.send(None)
            except StopIteration as e:
                return e.value, None, False
            except asyncio.CancelledError:
                return None, None, True
            except Exception as e:
                return None, e, False
            inner = asyncio.get_running_loop().create_task(_resume(coro, yielded))
        else:
            inner = _start_task(coro)
        st.running[inner] = 0
        try:
            while not inner.done():
                try:
                    await asyncio.wait({inner})
                except asyncio.CancelledError:
                    st.absorb()  # cancels inner: wait for it to end
        finally:
            st.running.pop(inner, None)
        if inner.cancelled():
            return None, None, True
        exc = inner.exception()
        if exc is None:
            return inner.result(), None, False
        if isinstance(exc, Exception):
            return None, exc, False
        raise exc

    @staticmethod
    def _cancelled_output(adm: Admitted) -> ToolOutput:
        if adm.decl.effect is Effect.ReadOnly:
            return ToolOutput(
                text="[cancelled] The call was cancelled before it finished. It changed nothing.",
                outcome=Outcome.error,
                cancelled=True,
            )
        return ToolOutput(
            text="[uncertain: cancelled] The call was cancelled while it ran; what it changed is unknown. "
            "Inspect the real state it would have changed before running it again.",
            outcome=Outcome.uncertain,
            cancelled=True,
        )

"""The dispatcher: admit -> run -> settle, the only place tools run.

Admission happens in the model's order: resolve -> validate -> classify -> hooks -> permission.
A refusal commits a dispatch-blocked event at once and settles as ``blocked``. Execution: runs of
consecutive non-Exclusive calls overlap under ``concurrency.tool_calls``; an Exclusive call is a
two-sided barrier. The intent row of a call is committed before it starts (at-most-once), and
results are persisted in call order whatever order they complete in.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from zuno import limits
from zuno.admission import describe_validation, measure_call, plain_call, sentence
from zuno.config import Config, json_type_name
from zuno.declarations import STRICT, BlockKind, Concurrency, Declarations, Effect, Outcome, Replay
from zuno.hooks import applies, run_hook
from zuno.output import Artifacts, apply_limits
from zuno.permissions import ApprovalRequest, Approver, decide
from zuno.records import CallRecord, StepResult, StepWrites
from zuno.settling import StepBook
from zuno.store import Store
from zuno.store.calls import CallEntry
from zuno.surface import Surface
from zuno.tool import Refused, Services, Tool, ToolArgs, ToolContext, ToolOutput, TransientError
from zuno.workspace import Workspace

CROSS_CUTTING = ("intent", "accept_large_output")


@dataclass
class _Admitted:
    idx: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    tool: Tool
    args: ToolArgs
    decl: Declarations
    accept_large_output: bool
    entry: CallEntry | None = None


@dataclass(eq=False)
class _StepState:
    """What belongs to one running step: its number, whether it was asked to stop, the tasks in
    which its tools are running now and whether it has ended. Several steps of one session may run
    at once (an MCP client sends requests concurrently): cancelling one settles only its own calls.

    A tool runs in the task that runs its call (the step's own task for a one-call run, a task of
    the call in a run of overlapping calls), with no task of its own; ``running`` counts the
    cancellations this step sent to each such task, so what the tool leaves pending of them is
    taken back when it returns, and a cancellation from outside (of the step's own task) is told
    apart from the step's own."""

    n: int
    cancel_requested: bool = False
    running: dict[asyncio.Task[Any], int] = field(default_factory=dict)
    ended: bool = False
    outer_cancelled: bool = False
    asking: asyncio.Task[bool | None] | None = None  # an approval question waiting for its answer

    def cancel(self) -> None:
        self.cancel_requested = True
        if self.asking is not None:
            self.asking.cancel()
        for t in list(self.running):
            self.running[t] += 1
            t.cancel()


@dataclass
class _Blocked:
    idx: int
    call_id: str
    name: str
    arguments: Any
    decl: Declarations
    kind: BlockKind
    message: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _is_valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_text(text: str) -> str:
    """An identifier as it can be recorded and echoed: invalid Unicode shown escaped."""
    return text if _is_valid_text(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _lone_surrogate(value: Any, where: str = "") -> str | None:
    """The dotted name of the first string (key or value) in value that is not valid Unicode."""
    if isinstance(value, str):
        return None if _is_valid_text(value) else (where or "(arguments)")
    if isinstance(value, dict):
        for k, v in value.items():
            key = f"{where}.{k}" if where else str(k)
            if not _is_valid_text(str(k)):
                return key
            if (found := _lone_surrogate(v, key)) is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _lone_surrogate(v, f"{where}[{i}]")) is not None:
                return found
    return None


async def _resume(coro: Any, yielded: Any) -> Any:
    """Drive, in this task, a coroutine another task started and that then waited on ``yielded``,
    as a task of its own would have: each future it waits on is awaited here, and a cancellation
    of this task reaches it the way a task delivers one (from the future it waits on, or thrown)."""
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


class Dispatcher:
    def __init__(
        self,
        *,
        session_id: str,
        workspace: Workspace,
        store: Store,
        config: Config,
        surface: Surface,
        services: Services,
        approver: Approver,
    ) -> None:
        self.session_id = session_id
        self.workspace = workspace
        self.store = store
        self.config = config
        self.surface = surface
        self.services = services
        self.approver = approver
        self.artifacts = Artifacts(workspace, store)
        self._bound = asyncio.Semaphore(config.concurrency.tool_calls)
        self._steps: set[_StepState] = set()
        self.artifact_reader = "bg" if "bg" in surface.tools else "read"

    # -- cancellation ---------------------------------------------------------------------------

    def cancel(self) -> None:
        """Cancel every running step: running calls are cancelled and settle with what they have;
        calls not started yet do not start. (Cancelling the task that runs one step cancels only
        that step.)"""
        for st in list(self._steps):
            st.cancel()

    # -- admission ------------------------------------------------------------------------------

    async def _admit(self, st: _StepState, idx: int, raw: Any) -> _Admitted | _Blocked:
        step = st.n
        # The usual call (an object of ASCII strings and scalars, its arguments one object of them)
        # is known to be within bounds and valid Unicode in one pass; any other is measured in full.
        plain = plain_call(raw)
        too_big = None if plain else measure_call(raw)
        if too_big is not None:
            # Nothing of the call is read (its id and name could be nested too) or recorded as sent.
            name = raw.get("name") if isinstance(raw, dict) else None
            name = _as_text(name) if isinstance(name, str) and len(name) <= 256 else ""
            return _Blocked(
                idx,
                f"call_{step:04d}_{idx:02d}",
                name,
                {"withheld": too_big},
                STRICT,
                BlockKind.invalid_arguments,
                too_big + ".",
            )
        if not isinstance(raw, dict):
            return _Blocked(
                idx,
                f"call_{step:04d}_{idx:02d}",
                "",
                raw,
                STRICT,
                BlockKind.invalid_arguments,
                'a call must be a JSON object with "name" and "arguments".',
            )
        call_id = str(raw.get("id") or f"call_{step:04d}_{idx:02d}")
        name = raw.get("name")
        if not plain:
            call_id = _as_text(call_id)
            if isinstance(name, str):
                name = _as_text(name)
        arguments: Any = raw.get("arguments", {})
        plain = plain and isinstance(arguments, dict)  # (arguments sent as a JSON string are parsed below)
        if not isinstance(name, str) or not name:
            return _Blocked(
                idx,
                call_id,
                str(name or ""),
                arguments,
                STRICT,
                BlockKind.invalid_arguments,
                'the call has no tool "name"; name one of: ' + ", ".join(self.surface.names()) + ".",
            )

        def refuse(kind: BlockKind, message: str, decl: Declarations = STRICT) -> _Blocked:
            return _Blocked(idx, call_id, name, arguments, decl, kind, message)

        # 1. resolve
        tool = self.surface.tools.get(name)
        if tool is None:
            why = self.surface.disabled.get(name)
            msg = (
                f"tool {name!r} is not available: {why}."
                if why
                else f"tool {name!r} is not available in profile {self.surface.profile!r}."
            )
            msg += " Available: " + ", ".join(self.surface.names()) + "."
            return refuse(BlockKind.unavailable, msg)
        # 2. validate
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                return refuse(
                    BlockKind.invalid_arguments,
                    f"arguments for {name} are not valid JSON ({e.msg} at column {e.colno}); send a JSON object.",
                )
            except RecursionError:
                arguments = {"withheld": "nested too deeply to read"}
                return refuse(
                    BlockKind.invalid_arguments,
                    f"arguments for {name} are nested too deeply to read; send flat arguments.",
                )
            # Parsed, the usual arguments (ASCII strings and scalars, an object or two deep) are
            # within bounds and valid Unicode as they stand; any others are measured in full.
            plain = plain_call(arguments)
            too_big = None if plain else measure_call(arguments)
            if too_big is not None:
                arguments = {"withheld": too_big}
                return refuse(BlockKind.invalid_arguments, f"arguments for {name}: {too_big}.")
        if not isinstance(arguments, dict):
            return refuse(
                BlockKind.invalid_arguments,
                f"arguments for {name} must be a JSON object, not {json_type_name(arguments)}.",
            )
        bad = None if plain else _lone_surrogate(arguments)
        if bad is not None:
            return refuse(
                BlockKind.invalid_arguments,
                f"argument '{bad}' is not valid Unicode text (it holds a lone surrogate, such as a \\ud800 escape "
                "with no pair); send valid UTF-8.",
            )
        rest = {k: v for k, v in arguments.items() if k not in CROSS_CUTTING}
        intent = arguments.get("intent")
        accept_large = arguments.get("accept_large_output", False)
        if intent is not None and not isinstance(intent, str):
            return refuse(
                BlockKind.invalid_arguments, "argument 'intent' must be a string (a UI label); fix or drop it."
            )
        if not isinstance(accept_large, bool):
            return refuse(BlockKind.invalid_arguments, "argument 'accept_large_output' must be true or false.")
        try:
            args = tool.Args.model_validate(rest)
        except ValidationError as e:
            return refuse(BlockKind.invalid_arguments, describe_validation(tool, e), decl=tool.declarations)
        # 3. classify
        decl = tool.classify(args)
        # 4. hooks
        payload: dict[str, Any] | None = None
        for hook in self.config.hooks.pre_dispatch:
            if applies(hook, name):
                if payload is None:
                    payload = {
                        "session": self.session_id,
                        "call_id": call_id,
                        "tool": name,
                        "arguments": arguments,
                        "declarations": decl.as_dict(),
                    }
                verdict = await run_hook(hook, payload, self.workspace.root)
                if not verdict.allowed:
                    return refuse(BlockKind.denied, sentence(verdict.reason), decl=decl)
        # 5. permission
        subject = tool.subject(args)
        decision = decide(self.config.permission, name, subject, decl)
        if decision.action == "deny":
            return refuse(BlockKind.denied, decision.reason + ".", decl=decl)
        if decision.action == "ask":
            answer = await self._ask(
                st, ApprovalRequest(self.session_id, call_id, name, subject, arguments, decl, decision.reason)
            )
            self.store.add_event(
                self.session_id,
                "approval",
                {"tool": name, "reason": decision.reason, "answer": answer},
                step=step,
                call_id=call_id,
            )
            if answer == "cancelled":
                return refuse(
                    BlockKind.denied,
                    f"approval was needed ({decision.reason}) and the step was cancelled before an answer "
                    "came; nothing ran.",
                    decl=decl,
                )
            if answer is None:
                return refuse(
                    BlockKind.denied,
                    f"approval was needed ({decision.reason}) and nobody could give it: no approver is "
                    "attached. Run on a terminal to be asked, or pass --approve.",
                    decl=decl,
                )
            if answer is False:
                return refuse(BlockKind.denied, f"approval was needed ({decision.reason}) and was declined.", decl=decl)
        return _Admitted(idx, call_id, name, arguments, tool, args, decl, accept_large)

    async def _ask(self, st: _StepState, request: ApprovalRequest) -> bool | Literal["cancelled"] | None:
        """The approver's answer; "cancelled" when the step was cancelled first (then nobody is
        asked, or the question is withdrawn), which is a refusal like any answer but yes."""
        if st.cancel_requested:
            return "cancelled"
        st.asking = asyncio.ensure_future(self.approver.approve(request))
        try:
            return await st.asking
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the step's own task was cancelled from outside: that is not ours to settle
            return "cancelled"
        finally:
            st.asking = None

    # -- the step -------------------------------------------------------------------------------

    async def step(
        self, calls: list[Any], notices: list[dict[str, Any]] | None = None, also: StepWrites | None = None
    ) -> StepResult:
        n = self.store.begin_step(self.session_id, {"calls": len(calls)})
        st = _StepState(n)
        self._steps.add(st)
        try:
            return await self._step(st, calls, notices, also)
        finally:
            self._steps.discard(st)

    async def _step(
        self, st: _StepState, calls: list[Any], notices: list[dict[str, Any]] | None, also: StepWrites | None
    ) -> StepResult:
        n = st.n
        running = [o.n for o in self._steps if o is not st]
        delivered = [*(notices or []), *self.store.take_notices(self.session_id, n, running)]
        book = StepBook(self.store, self.session_id, st, len(calls), also)

        admissions: list[_Admitted | _Blocked] = []
        for idx, raw in enumerate(calls):
            adm = await self._admit(st, idx, raw)
            if isinstance(adm, _Blocked):
                self.store.add_event(
                    self.session_id,
                    "dispatch-blocked",
                    {"tool": adm.name, "block_kind": str(adm.kind), "reason": adm.message},
                    step=n,
                    call_id=adm.call_id,
                )
            admissions.append(adm)

        blocked = [adm for adm in admissions if isinstance(adm, _Blocked)]
        for b in blocked:
            book.add(b.idx, self._blocked_entry(n, b))
        if blocked:
            book.flush()

        segments: list[list[_Admitted]] = []
        for adm in admissions:
            if not isinstance(adm, _Admitted):
                continue
            exclusive = adm.decl.concurrency is Concurrency.Exclusive
            if exclusive or not segments or segments[-1][0].decl.concurrency is Concurrency.Exclusive:
                segments.append([adm])
            else:
                segments[-1].append(adm)

        async def one(adm: _Admitted) -> None:
            # A result that stands for an effect is made durable as soon as it is in (a crash
            # after would otherwise leave it uncertain); a read-only one waits for the segment's
            # end, so a run of reads settles in one commit (a crash before loses only results
            # that nothing depends on: those calls did nothing).
            book.add(adm.idx, await self._run_call(st, adm), soon=adm.decl.effect is not Effect.ReadOnly)

        for seg in segments:
            if st.cancel_requested:
                for adm in seg:
                    book.add(adm.idx, self._not_started(n, adm))
                continue
            self._open_run(n, seg)
            if len(seg) == 1:
                # One call: awaited in the step's own task (no task of its own); a cancellation of
                # the step reaching it is absorbed there, the call settles, then it goes through.
                book.add(seg[0].idx, await self._run_call(st, seg[0], direct=True))
                book.flush()
                if st.outer_cancelled:
                    self._record_rest(n, segments, seg, book)
                    self._end_step(st, book)
                    raise asyncio.CancelledError
                continue
            tasks = [asyncio.create_task(one(adm)) for adm in seg]
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                # The step itself was cancelled (API): cancel the calls, let them settle, record
                # everything, then let the cancellation through.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                st.cancel()
                await asyncio.wait(tasks)
                self._record_rest(n, segments, seg, book)
                self._end_step(st, book)
                raise
            for t in tasks:
                if (exc := t.exception()) is not None:  # a bug in the dispatcher itself
                    raise exc
            book.flush()
        self._end_step(st, book)
        return StepResult(self.session_id, n, [r for r in book.records if r is not None], delivered)

    def _open_run(self, n: int, seg: list[_Admitted]) -> None:
        """Number the calls of a run and commit the intents of its Never calls, all in one
        transaction (with a full sync), before any of them starts. A Safe call gets no intent row:
        it may be run again by definition, so it is written once, settled."""
        intents = []
        for adm in seg:
            never = adm.decl.replay is not Replay.Safe
            adm.entry = CallEntry(
                "intent" if never else "ran",
                self.session_id,
                n,
                adm.idx,
                adm.call_id,
                adm.name,
                adm.arguments,
                adm.decl.as_dict(),
                seq=self.store.next_call_seq(),
                started_at=time.time(),
            )
            if never:
                intents.append(adm.entry)
        if intents:
            self.store.write_intents(intents)

    def _record_rest(self, n: int, segments: list[list[_Admitted]], current: list[_Admitted], book: StepBook) -> None:
        after = False
        for seg in segments:
            if seg is current:
                after = True
                continue
            if after:
                for adm in seg:
                    book.add(adm.idx, self._not_started(n, adm))

    def _end_step(self, st: _StepState, book: StepBook) -> None:
        book.flush()
        if not st.ended:
            st.ended = True
            self.store.end_step(self.session_id, st.n)

    # -- settling -------------------------------------------------------------------------------

    def _blocked_entry(self, n: int, b: _Blocked) -> tuple[CallEntry, CallRecord]:
        text = f"[blocked: {b.kind}] {sentence(b.message)} Nothing ran."
        entry = CallEntry(
            "settled",
            self.session_id,
            n,
            b.idx,
            b.call_id,
            b.name,
            b.arguments,
            b.decl.as_dict(),
            outcome=str(Outcome.blocked),
            block_kind=str(b.kind),
            text=text,
            metadata=b.metadata,
        )
        rec = CallRecord(b.call_id, b.name, Outcome.blocked, b.kind, False, text, b.metadata, b.decl, None, None)
        return entry, rec

    def _not_started(self, n: int, a: _Admitted) -> tuple[CallEntry, CallRecord]:
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

    @staticmethod
    def _absorb(st: _StepState) -> None:
        """The step's own task was cancelled while it ran a call directly: take the cancellation
        as the step's (its calls stop and settle); the step re-raises it once recorded."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        st.outer_cancelled = True
        st.cancel()

    async def _run_call(self, st: _StepState, adm: _Admitted, direct: bool = False) -> tuple[CallEntry, CallRecord]:
        if adm.decl.concurrency is Concurrency.Exclusive:
            return await self._run_admitted(st, adm, direct)
        try:
            await self._bound.acquire()
        except asyncio.CancelledError:
            if not direct:
                raise
            self._absorb(st)
            return self._not_started(st.n, adm)
        try:
            return await self._run_admitted(st, adm, direct)
        finally:
            self._bound.release()

    async def _run_admitted(self, st: _StepState, adm: _Admitted, direct: bool) -> tuple[CallEntry, CallRecord]:
        n = st.n
        entry = adm.entry
        if st.cancel_requested or entry is None:
            return self._not_started(n, adm)
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
            text = f"[blocked: {out.kind}] {sentence(out.message)} Nothing ran."
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

    async def _invoke(self, ctx: ToolContext, adm: _Admitted, st: _StepState, direct: bool) -> ToolOutput | Refused:
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
                    self._take_back(task, st, base, own, direct and task.cancelling() - base > own)
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
        self, task: asyncio.Task[Any], ctx: ToolContext, adm: _Admitted, st: _StepState, direct: bool
    ) -> tuple[Any, Exception | None, bool]:
        """Run the tool: (output, exception, cancelled). In a run of overlapping calls it runs in
        its call's task (which only the step cancels); in the step's own task it is started there
        and, if it has to wait, goes on in a task of its own (``_run_direct``)."""
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
        self._take_back(task, st, base, st.running.pop(task), False)
        return out, exc, cancelled

    async def _run_direct(self, ctx: ToolContext, adm: _Admitted, st: _StepState) -> tuple[Any, Exception | None, bool]:
        """The tool of a one-call run, started eagerly in the step's own task: a tool that finishes
        without waiting (a small read) needs no task at all. One that waits goes on in a task of its
        own, exactly as if it had started there: a cancellation of the step's task from outside is
        the step's to absorb (the tool gets the step's cancel, never the caller's)."""
        coro = adm.tool.run(ctx, adm.args)
        try:
            yielded = coro.send(None)
        except StopIteration as e:
            return e.value, None, False
        except asyncio.CancelledError:
            return None, None, True
        except Exception as e:
            return None, e, False
        inner = asyncio.get_running_loop().create_task(_resume(coro, yielded))
        st.running[inner] = 0
        try:
            while not inner.done():
                try:
                    await asyncio.wait({inner})
                except asyncio.CancelledError:
                    self._absorb(st)  # cancels inner: wait for it to end
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
    def _take_back(task: asyncio.Task[Any], st: _StepState, base: int, own: int, outer: bool) -> None:
        """Take back the cancellations of this task that the step sent (``own``) and, when one came
        from outside the step's own task (``outer``), that one too: the step absorbs it (its calls
        stop and settle) and re-raises it once recorded. The task is left as cancelled as it was
        before the tool ran (``base``)."""
        extra = task.cancelling() - base
        for _ in range(max(0, extra if outer else min(own, extra))):
            task.uncancel()
        if outer:
            st.outer_cancelled = True
            st.cancel()

    @staticmethod
    def _cancelled_output(adm: _Admitted) -> ToolOutput:
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

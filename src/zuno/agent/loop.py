"""The agent loop: one turn of a session, request by request, step by step.

A turn sends the history window and the visible surface, receives text and tool calls, runs the
calls as ONE step through ``Session.step``, records the results in call order, and goes on until
the model gives a final answer, the user interrupts, a wait is needed or a limit is reached. Every
fact is committed before the next request goes out; before each request the dynamic context is
rebuilt from the committed database (a failed refresher pauses the turn), pending notices are
taken through an empty step, and any tool call still without a result gets its recovery result.

After a provider final the reconciliation driver decides: an ordinary final ends the cycle (it
never marks work complete); an active owned Goal with runnable work continues, and pauses with
``no_progress`` after three identical observations; a running background job (a remote observer,
or a local job this process started) makes the stop ``waiting_background``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zuno import limits
from zuno.agent.call_ids import unique_call_ids
from zuno.agent.compaction import (
    CompactionFailure,
    Compactor,
    Estimator,
    SummaryFailed,
    compaction_failed_advice,
    compaction_failed_notice,
    overflow_advice,
)
from zuno.agent.context import build_system
from zuno.agent.events import (
    AgentEvent,
    NoticeEvent,
    RequestEvent,
    StopEvent,
    StopReason,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnResult,
)
from zuno.agent.fit import cut_notice, fit_results
from zuno.agent.items import Mode, ToolResultRow
from zuno.agent.providers.retry import OVERFLOW_CATEGORIES
from zuno.agent.reconcile import Reconciliation
from zuno.agent.recovery import settle_unmatched
from zuno.agent.transcript import StreamSaver, Transcript
from zuno.agent.types import (
    Finished,
    HostedTool,
    ImagePart,
    ModelRequest,
    Provider,
    ProviderError,
    RequestOutcome,
    StreamRestarted,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    ToolSpec,
)
from zuno.declarations import Effect
from zuno.projection import ContextSection, RefreshFailed, build_sections
from zuno.records import CallRecord

if TYPE_CHECKING:
    from zuno.runtime import Session
    from zuno.tool import Tool

# Plan mode shows read-only tools and the durable-state tools that shape a plan.
PLAN_MODE_TOOLS = frozenset(
    {"plan_get", "plan_update", "plan_exit", "todo_get", "todo_update", "todo_write", "goal_get", "question"}
)
# The single-read tools whose unchanged results end a stagnant loop.
PROGRESS_READS = frozenset({"plan_get", "todo_get"})
CONTINUE_GOAL_TEXT = (
    "Goal continuation: the active Goal still has runnable work (see the dynamic context). Continue with "
    "the next concrete action; answer without a tool call only when you are blocked or it is done."
)
RESUME_TEXT = "The session was resumed: continue the work where it stopped, from the state shown."
INTERRUPTED_BEFORE_STEP_TEXT = "[cancelled] The user interrupted the turn before this step started. Nothing ran."
CANCELLED_TURN_TEXT = (
    "the turn was cancelled from outside (the process was terminated, or its caller cancelled it)"
)
OUTPUT_LIMIT_CALL_TEXT = (
    "- [output_limit] The answer reached the model's output limit ({tokens} tokens, {key}) while it "
    "was writing the arguments of {calls}: they were cut off, so the call was refused and nothing ran. "
    "Sending the same call again is cut off again: split the work into smaller calls (write a large "
    "file in parts, send a shorter patch)."
)
WAKE_TEXT = "The session was woken by a background completion: continue from the state shown."
WAITING_INPUT_TEXT = (
    "the Goal waits for the user's input (required-input request {request}); answer it with zuno goal resume "
    "--input 'your answer' (in zuno run: /goal resume your answer)"
)


@dataclass(slots=True)
class _Turn:
    n: int
    started: float
    deadline: float
    steps: int = 0
    continuations: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0})
    final_text: str = ""
    overflowed: bool = False  # a request of this turn was refused as too long and compacted for
    # The last compaction of this turn that failed (cleared by one that succeeds): the requests after
    # it go out uncompacted, without paying for a failing summary request before each of them.
    compaction_failure: CompactionFailure | None = None
    pauses: int = 0  # answers the provider paused (and the turn sent back to go on)
    paused_text: str = ""  # their text, which the final answer continues


class _Stop(Exception):
    def __init__(self, reason: StopReason, detail: str = "") -> None:
        super().__init__(detail)
        self.reason: StopReason = reason
        self.detail = detail


class _Overflow(Exception):
    """A turn's request the server refused as longer than the model's context (``context_length``)
    or larger than it accepts (``too_large``, HTTP 413):
    the turn compacts harder and sends it again, once."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


class AgentLoop(Reconciliation):
    def __init__(
        self,
        session: Session,
        provider: Provider,
        *,
        mode: Mode | None = None,
        summary_provider: Provider | None = None,
        emit: Callable[[AgentEvent], None] | None = None,
    ) -> None:
        self.session = session
        self.provider = provider
        self.config = session.runtime.config
        self.store = session.runtime.store
        self.transcript = Transcript(self.store, session.id)
        if mode is not None:
            self.set_mode(mode)
        self.transcript.set_model(provider.id)
        self.refreshers = list(session.runtime.registry.refreshers)
        self.goal_observers = list(session.runtime.registry.goal_observers)
        self.compactor = Compactor(self, summary_provider or provider)
        self.emit: Callable[[AgentEvent], None] = emit or (lambda _e: None)
        self._stream_task: asyncio.Task[Finished] | None = None
        self._in_step = False
        self._interrupt: StopReason | None = None
        self.last_request_id = 0
        self._specs: dict[tuple[str, int], ToolSpec] = {}
        self._visible: tuple[tuple[object, ...], list[Tool], tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]]] | None
        self._visible = None
        self._hidden: dict[str, str] = {}
        self._call_ids: set[str] | None = None
        self.estimate = Estimator()

    # -- control --------------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self.transcript.state().mode

    def set_mode(self, mode: Mode) -> None:
        self.transcript.set_mode(mode)

    def interrupt(self, reason: StopReason = "interrupted") -> None:
        """Stop the turn: a stream in flight is cancelled (its partial text kept, marked), a step in
        flight is cancelled with the dispatcher's settlement, otherwise the turn stops before its
        next request."""
        self._interrupt = reason
        if self._stream_task is not None and not self._stream_task.done():
            self._stream_task.cancel()
        elif self._in_step:
            self.session.cancel()

    # -- the surface ----------------------------------------------------------------------------

    def visible(self, mode: Mode) -> tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]]:
        tools: list[Tool] = self.session.visible_tools()
        # The same tools in the same mode give the same surface (the config is fixed for a run).
        key = (mode, *map(id, tools))
        memo = self._visible
        if memo is not None and memo[0] == key and all(a is b for a, b in zip(memo[1], tools, strict=True)):
            return memo[2]
        shown, self._hidden = self._visible_of(mode, tools)
        self._visible = (key, tools, shown)
        return shown

    def _visible_of(
        self, mode: Mode, tools: list[Tool]
    ) -> tuple[tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]], dict[str, str]]:
        """The specs and hosted tools offered in ``mode``, and the tools held back from the model
        (name → why): a call naming one of those is refused by admission, never run."""
        hosted: list[HostedTool] = []
        hidden: dict[str, str] = {}
        compat = self.config.compat
        if "web_search" in compat.hosted_tools and "web_search" in self.provider.hosted_tools_supported:
            hosted.append(
                HostedTool(
                    "web_search",
                    tuple(compat.web_search.allowed_domains),
                    tuple(compat.web_search.blocked_domains),
                )
            )
            if any(t.name == "web_search" for t in tools):
                hidden["web_search"] = "web search is the provider's hosted tool here"
            tools = [t for t in tools if t.name != "web_search"]
        if not self.provider.accepts_images:
            if any(t.name == "view_image" for t in tools):
                hidden["view_image"] = "the active model does not accept images"
            tools = [t for t in tools if t.name != "view_image"]
        if mode == "plan":
            for t in tools:
                if t.name not in PLAN_MODE_TOOLS and not _read_only(t):
                    hidden[t.name] = "Plan mode offers only read-only and planning tools (switch to Work mode)"
            tools = [t for t in tools if t.name in PLAN_MODE_TOOLS or _read_only(t)]
        specs = tuple(self._spec(t) for t in tools)
        return (specs, tuple(hosted)), hidden

    def _spec(self, tool: Tool) -> ToolSpec:
        """A tool's exported spec, made once per tool object (its schema does not change)."""
        key = (tool.name, id(tool))
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = ToolSpec(tool.name, tool.description, tool.input_schema())
        return spec

    # -- the turn -------------------------------------------------------------------------------

    async def run_turn(
        self, prompt: str | None = None, *, source: str = "user", images: Sequence[ImagePart] = ()
    ) -> TurnResult:
        """One turn. ``prompt`` None continues the session (a resume, or a background wake)."""
        self._interrupt = None
        state = self.transcript.state()
        mode = state.mode
        n = self.transcript.begin_turn(mode)
        lim = self.config.agent.limits
        turn = _Turn(n, time.monotonic(), time.monotonic() + lim.seconds_per_turn)
        # A call left without a result (a crash, an abandoned step) gets its result first, so it
        # stays next to its call, before anything this turn adds.
        settle_unmatched(self.transcript, self.store, self.session.id)
        if prompt is not None:
            self.transcript.add_user(n, prompt, images)
            self._reset_cycle()
        elif source in ("resume", "wake"):
            await self._take_notices(n)  # what woke or resumed the session comes first
            if not self._has_pending_input():
                self.transcript.add_notice(n, RESUME_TEXT if source == "resume" else WAKE_TEXT, source)
        try:
            reason, detail = await self._drive(turn)
        except _Stop as s:
            reason, detail = s.reason, s.detail
        except asyncio.CancelledError:
            # Cancelled from outside the turn (SIGTERM, a second Ctrl-C, the caller): what it did is
            # recorded, and so is its end, or the turn stayed open in the record for good.
            self.transcript.flush()
            self.transcript.end_turn(n, "interrupted", CANCELLED_TURN_TEXT, turn.steps)
            self.store.add_event(
                self.session.id,
                "agent-turn-stopped",
                {"turn": n, "stop_reason": "interrupted", "detail": CANCELLED_TURN_TEXT},
            )
            raise
        finally:
            self.transcript.flush()
        self.transcript.end_turn(n, reason, detail, turn.steps)
        self.store.add_event(
            self.session.id, "agent-turn-stopped", {"turn": n, "stop_reason": reason, "detail": detail}
        )
        self.emit(StopEvent(reason, detail, turn.final_text, n))
        return TurnResult(self.session.id, n, reason, detail, turn.final_text, turn.steps, turn.usage)

    async def _drive(self, turn: _Turn) -> tuple[StopReason, str]:
        lim = self.config.agent.limits
        while True:
            if self._interrupt is not None:
                return self._interrupt, "before the next request"
            settle_unmatched(self.transcript, self.store, self.session.id)
            await self._take_notices(turn.n)
            if turn.steps >= lim.steps_per_turn:
                return "step_limit", f"{turn.steps} steps (agent.limits.steps_per_turn = {lim.steps_per_turn})"
            used = turn.usage["input_tokens"] + turn.usage["output_tokens"]
            if used >= lim.tokens_per_turn:
                return "token_limit", f"{used} tokens (agent.limits.tokens_per_turn = {lim.tokens_per_turn})"
            if time.monotonic() >= turn.deadline:
                return "time_limit", f"agent.limits.seconds_per_turn = {lim.seconds_per_turn}"
            mode = self.transcript.state().mode
            sections = self._sections()
            failed_before = turn.compaction_failure
            request, context_digest = await self._request(turn, mode, sections)
            try:
                fin = await self._send(turn, request, context_digest, "turn")
            except _Overflow as e:
                # A compaction that failed while this very request was built is not tried again.
                just_failed = turn.compaction_failure if turn.compaction_failure is not failed_before else None
                await self._compact_for_overflow(turn, request, e.error, just_failed)
                continue
            if fin.message.tool_calls:
                turn.final_text = turn.paused_text = ""
                await self._step(turn, fin.message.tool_calls)
                if fin.stop_reason == "max_tokens":
                    self._note_cut_calls(turn, fin.message.tool_calls)
                continue
            turn.final_text = turn.paused_text + fin.message.text
            if fin.stop_reason == "paused" and turn.pauses < limits.PAUSED_ANSWER_CONTINUATIONS:
                # The provider paused its own long server-side loop (Anthropic's pause_turn, in a
                # hosted web search): the answer so far is sent back as it is, and it goes on.
                turn.pauses += 1
                turn.paused_text = turn.final_text
                continue
            if fin.stop_reason == "max_tokens":
                return "max_output_tokens", "the answer reached the model's output limit"
            decision = self._reconcile(turn, mode)
            if decision == "wake":
                continue  # the completion notice is taken before the next request
            if decision != "goal":
                return decision
            turn.continuations += 1
            self.transcript.add_notice(turn.n, CONTINUE_GOAL_TEXT, "continuation")

    async def _compact_for_overflow(
        self, turn: _Turn, request: ModelRequest, error: ProviderError, just_failed: CompactionFailure | None
    ) -> None:
        """The server refused ``request`` as too long for its context: compact harder (at most half
        of the window is kept) so that it goes out again, once. When it cannot be compacted the
        turn stops with ``provider_error``; everything recorded stays, so the session resumes."""
        estimate = self.estimate(request)
        if turn.overflowed:
            raise _Stop("provider_error", overflow_advice(self.provider, error, estimate))
        outcome = just_failed or await self.compactor.compact(turn, request, shrink=True)
        if outcome == "compacted":
            turn.overflowed = True
            turn.compaction_failure = None
            return
        if isinstance(outcome, CompactionFailure):
            turn.compaction_failure = outcome
            advice = compaction_failed_advice(self.provider, error, estimate, outcome, self.session.id)
            raise _Stop("provider_error", advice)
        raise _Stop("provider_error", overflow_advice(self.provider, error, estimate))

    def _note_compaction_failed(self, turn: _Turn, failure: CompactionFailure, estimate: int, budget: float) -> None:
        """A compaction before the budget failed: the request still fits the model's context as Zuno
        knows it, so it goes out uncompacted, and the caller is told (the compactor recorded the event)."""
        turn.compaction_failure = failure
        self.emit(NoticeEvent(compaction_failed_notice(failure, estimate, budget), "compaction"))

    def _note_cut_calls(self, turn: _Turn, calls: Sequence[ToolCall]) -> None:
        """The answer reached the output limit while it wrote a call's arguments: admission refused
        the cut-off JSON ("not valid JSON; send a JSON object"), and the model, told only that,
        sent the same call again and was cut again, step after step. A notice after the results
        says why, and what to do instead."""
        cut = [c.id for c in calls if not _json_object(c.arguments)]
        if not cut:
            return
        pid, _, name = self.provider.id.partition("/")
        text = OUTPUT_LIMIT_CALL_TEXT.format(
            calls=", ".join(cut), tokens=self.provider.output_tokens, key=f"provider.{pid}.models.{name}.output"
        )
        self.transcript.add_notice(turn.n, text, "output_limit", ["output_limit"])
        self.emit(NoticeEvent(text, "output_limit"))

    # -- before a request -----------------------------------------------------------------------

    def _sections(self) -> list[ContextSection]:
        try:
            return build_sections(self.refreshers, self.store, self.session.id)
        except RefreshFailed as e:
            raise _Stop("context_refresh_failed", str(e)) from e

    async def _request(self, turn: _Turn, mode: Mode, sections: list[ContextSection]) -> tuple[ModelRequest, str]:
        tools, hosted = self.visible(mode)
        for passes in range(limits.COMPACT_MAX_PASSES + 1):
            system, context_digest = build_system(
                root=str(self.session.runtime.root),
                mode=mode,
                sections=sections,
                sources=self.transcript.user_sources(),
                in_window=self.transcript.window_user_ids,
                extra=self.config.agent.instructions,
                # Maintain once the session's Plan has a committed revision, however it was made (an
                # earlier turn, `zuno call`, another transport): its section is in the context.
                plan_mutated=bool(self.transcript.state().data.get("plan_mutated"))
                or any(s.name == "plan" for s in sections),
                goal_tool=any(t.name == "goal_update" for t in tools),
                input_tool=any(t.name == "goal_request_input" for t in tools),
            )
            request = ModelRequest(
                model=self.provider.id.split("/", 1)[-1],
                system=system,
                messages=self.transcript.messages(),
                tools=tools,
                hosted_tools=hosted,
                max_output_tokens=self.provider.output_tokens or None,
            )
            budget = self.config.agent.compaction.at_fraction * self.provider.context_tokens
            estimate = self.estimate(request)
            # After the last allowed pass the request is the one built from its window, sent as it is;
            # after a failed compaction in this turn, too.
            if estimate <= budget or passes == limits.COMPACT_MAX_PASSES or turn.compaction_failure is not None:
                break
            outcome = await self.compactor.compact(turn, request)
            if isinstance(outcome, CompactionFailure):
                self._note_compaction_failed(turn, outcome, estimate, budget)
            if outcome != "compacted":
                break
        return self._fit(request), context_digest

    def _fit(self, request: ModelRequest) -> ModelRequest:
        """A request still longer than the model's context (less its answer) once compacted goes out
        with its largest tool results shortened (``agent/fit.py``); the record keeps them whole."""
        context = self.provider.context_tokens
        output = self.provider.output_tokens
        limit = context - output if 0 < output < context else context
        fitted, cuts = fit_results(request, limit, context, self.estimate)
        if cuts:
            self.emit(NoticeEvent(cut_notice(cuts, context), "context"))
        return fitted

    async def _take_notices(self, turn: int) -> None:
        """Pending notices (recovery of an interrupted call, a job's completion) reach the next
        request: an empty step takes them and marks them delivered."""
        if not self.store.notices_pending(self.session.id):
            return
        result = await self.session.step([])
        self._record_notices(turn, result.notices, "notices")

    def _record_notices(self, turn: int, notices: list[dict[str, Any]], source: str) -> None:
        if not notices:
            return
        text = "\n".join(f"- [{n.get('kind', 'notice')}] {n.get('text', '')}" for n in notices)
        self.transcript.add_notice(turn, text, source, [str(n.get("kind", "")) for n in notices])
        self.emit(NoticeEvent(text, source))

    def _has_pending_input(self) -> bool:
        """Does the window end with something the model has not answered yet?"""
        _, items = self.transcript.window()
        return bool(items) and items[-1].kind in ("tool_result", "notice", "user")

    # -- the request ----------------------------------------------------------------------------

    async def _send(self, turn: _Turn, request: ModelRequest, context_digest: str, purpose: str) -> Finished:
        floor = self.transcript.calls_seq_floor()
        req_id = self.transcript.request_sent(
            turn.n, purpose, self.provider.id, request, context_digest, self.estimate(request)
        )
        self.emit(RequestEvent(req_id, purpose, "sent"))
        outcome = RequestOutcome()
        partial: list[str] = []
        # A turn's answer is shown as it streams, so it is saved as it streams too (bounded writes).
        saver = StreamSaver(self.transcript, req_id, partial) if purpose == "turn" else None

        async def consume() -> Finished:
            # The stream is read to its end (after its Finished the adapter records the attempt).
            fin: Finished | None = None
            async with contextlib.aclosing(self.provider.stream(request, outcome)) as events:
                async for ev in events:
                    if isinstance(ev, TextDelta):
                        partial.append(ev.text)
                        if saver is not None:
                            self.emit(TextEvent(ev.text))
                            saver.added(ev.text)
                    elif isinstance(ev, ToolCallStarted):
                        pass
                    elif isinstance(ev, StreamRestarted):
                        # The broken attempt's text is void: the new attempt streams from the start.
                        partial.clear()
                        if saver is not None:
                            saver.restarted()
                        detail = f"the answer broke off ({ev.category}); asking again"
                        self.emit(RequestEvent(req_id, purpose, "restarted", ev.attempt, detail))
                    elif isinstance(ev, Finished):
                        fin = ev
            if fin is not None:
                return fin
            raise ProviderError(
                f"provider {self.provider.id} ({self.provider.api}) ended the stream without finishing it",
                category="protocol",
            )

        task = asyncio.create_task(consume())
        self._stream_task = task
        remaining = turn.deadline - time.monotonic()
        timer = asyncio.get_running_loop().call_later(max(0.0, remaining), self.interrupt, "time_limit")
        try:
            fin = await task
        except asyncio.CancelledError:
            self.transcript.request_interrupted(
                req_id, turn.n, "".join(partial), outcome.attempts, keep=purpose == "turn"
            )
            self.emit(RequestEvent(req_id, purpose, "ended", len(outcome.attempts)))
            if task.cancelled() and self._interrupt is not None and not _outer_cancelled():
                raise _Stop(self._interrupt, "during the model's answer (partial text kept)") from None
            raise
        except ProviderError as e:
            # A turn's text streamed before the error is kept (shown already), marked failed; a
            # request refused as too long is sent again compacted, so nothing of it is kept.
            kept = "".join(partial) if purpose == "turn" and e.category not in OVERFLOW_CATEGORIES else ""
            attempts = e.attempts or tuple(outcome.attempts)
            self.transcript.request_failed(req_id, e.category, str(e), attempts, turn=turn.n, partial=kept)
            self.emit(RequestEvent(req_id, purpose, "ended", len(outcome.attempts)))
            if e.category in OVERFLOW_CATEGORIES and purpose == "turn":
                raise _Overflow(e) from None
            if purpose == "compaction":
                raise SummaryFailed(e.category, str(e)) from None
            raise _Stop("provider_error", str(e)) from None
        except Exception as e:  # an adapter's own failure is a value here too, never a traceback
            detail = f"provider {self.provider.id} ({self.provider.api}) failed: {type(e).__name__}"
            kept = "".join(partial) if purpose == "turn" else ""
            self.transcript.request_failed(
                req_id, "adapter", detail, tuple(outcome.attempts), turn=turn.n, partial=kept
            )
            self.emit(RequestEvent(req_id, purpose, "ended", len(outcome.attempts)))
            if purpose == "compaction":
                raise SummaryFailed("adapter", detail) from None
            raise _Stop("provider_error", detail) from None
        finally:
            timer.cancel()
            self._stream_task = None
            if saver is not None:
                saver.stop()
        if fin.message.tool_calls:  # unique in the session before anything records or pairs the calls
            used = self._used_call_ids()
            fin = unique_call_ids(fin, used)
            used.update(c.id for c in fin.message.tool_calls)
        self.last_request_id = req_id
        # A response whose calls are all read-only is committed with their results, one commit
        # less per step: nothing it asks for can have an effect before that commit.
        defer = purpose == "turn" and bool(fin.message.tool_calls) and self._read_only_calls(fin.message.tool_calls)
        self.transcript.request_finished(
            req_id, turn.n, fin, outcome.attempts, floor, item=purpose == "turn", defer=defer
        )
        self.emit(RequestEvent(req_id, purpose, "ended", len(outcome.attempts)))
        for k, v in (
            ("input_tokens", fin.usage.input_tokens),
            ("output_tokens", fin.usage.output_tokens),
            ("cached_tokens", fin.usage.cached_tokens),
        ):
            turn.usage[k] += v
        return fin

    def _used_call_ids(self) -> set[str]:
        """The call ids the session already has (its dispatched calls, from any transport, and its
        transcript's results), read once; the loop adds each answer's ids (the session is its own
        while it runs)."""
        if self._call_ids is None:
            rows = self.store.query(
                "SELECT call_id FROM calls WHERE session_id = ? UNION"
                " SELECT call_id FROM agent_items WHERE session_id = ? AND call_id IS NOT NULL",
                (self.session.id, self.session.id),
            )
            self._call_ids = {str(r[0]) for r in rows}
        return self._call_ids

    def _read_only_calls(self, calls: Sequence[ToolCall]) -> bool:
        """Can none of these calls have an effect? (A call of an unknown tool is refused.)"""
        tools = self.session.runtime.surface.tools
        for c in calls:
            tool = tools.get(c.name)
            if tool is not None and not _read_only(tool):
                return False
        return True

    # -- the step -------------------------------------------------------------------------------

    async def _step(self, turn: _Turn, calls: Sequence[ToolCall]) -> None:
        for c in calls:
            self.emit(ToolCallEvent(c.id, c.name, c.arguments))
        if self._interrupt is not None:
            self.transcript.add_tool_results(
                turn.n,
                None,
                [
                    ToolResultRow(c.id, c.name, INTERRUPTED_BEFORE_STEP_TEXT, "error", None, cancelled=True)
                    for c in calls
                ],
            )
            raise _Stop(self._interrupt, "before the tool step started (nothing ran)")
        raw = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        self._in_step = True
        remaining = turn.deadline - time.monotonic()
        timer = asyncio.get_running_loop().call_later(max(0.0, remaining), self.interrupt, "time_limit")
        # The result items (and the writes waiting for them) ride in the step's own last commit.
        also = self.transcript.results_with_step(turn.n, lambda records: self._result_rows(calls, records))
        try:
            result = await self.session.step(raw, also=also, hidden=self._hidden)
        finally:
            timer.cancel()
            self._in_step = False
            if not also.done:
                self.transcript.abandon_step_writes()
        turn.steps += 1
        if not also.done:
            self.transcript.add_tool_results(turn.n, result.step, self._result_rows(calls, result.results))
        for c, rec in zip(calls, result.results, strict=True):
            code = rec.metadata.get("exitCode")
            self.emit(
                ToolResultEvent(
                    c.id,
                    c.name,
                    str(rec.outcome),
                    rec.text,
                    rec.cancelled,
                    str(rec.block_kind) if rec.block_kind else None,
                    code if isinstance(code, int) and not isinstance(code, bool) else None,
                )
            )
        self._record_notices(turn.n, result.notices, "step")
        if self._interrupt is not None:
            raise _Stop(self._interrupt, "during a tool step (the step was cancelled and settled)")
        if any(r.name == "plan_update" and str(r.outcome) == "ok" for r in result.results):
            data = self.transcript.state().data
            if not data.get("plan_mutated"):
                data["plan_mutated"] = True
                self.transcript.save_data(data)
        self._check_stagnant(result.results)
        self._check_waiting_input(result.results)

    def _check_waiting_input(self, results: Sequence[CallRecord]) -> None:
        """A successful goal_request_input paused the Goal for the user's answer and recorded the
        session's wait: the turn ends here, with no further request and no automatic continuation
        (only the answer to that request resumes the Goal)."""
        waits = [str(r.metadata["waitingInput"]) for r in results if _ok(r) and r.metadata.get("waitingInput")]
        if not waits:
            return
        self.store.add_event(self.session.id, "waiting-input", {"requests": waits})
        raise _Stop("waiting_input", WAITING_INPUT_TEXT.format(request=waits[-1]))

    def _result_rows(self, calls: Sequence[ToolCall], records: Sequence[CallRecord]) -> list[ToolResultRow]:
        rows = []
        for c, rec in zip(calls, records, strict=True):
            images: tuple[ImagePart, ...] = ()
            image = rec.metadata.get("image")
            if isinstance(image, dict) and image.get("base64") and self.provider.accepts_images:
                images = (ImagePart(str(image.get("mime", "image/png")), str(image["base64"])),)
            rows.append(
                ToolResultRow(c.id, c.name, rec.text, str(rec.outcome), rec.seq, images, cancelled=rec.cancelled)
            )
        return rows

    def _check_stagnant(self, results: Sequence[Any]) -> None:
        state = self.transcript.state()
        data = state.data
        key = None
        if len(results) == 1:
            rec = results[0]
            fp = rec.metadata.get("progressFingerprint")
            if rec.name in PROGRESS_READS and str(rec.outcome) == "ok" and fp:
                key = f"{rec.name}:{fp}"
        count = (
            (int(data.get("stagnant_count", 0)) + 1)
            if key is not None and key == data.get("stagnant_key")
            else (1 if key is not None else 0)
        )
        if (data.get("stagnant_key"), int(data.get("stagnant_count", 0))) != (key, count):
            data["stagnant_key"], data["stagnant_count"] = key, count
            self.transcript.save_data(data)
        if count >= limits.STAGNANT_READ_STEPS:
            data["stagnant_count"] = 0
            self.transcript.save_data(data)
            raise _Stop(
                "stagnant_tool_loop",
                f"{count} consecutive single-read steps of {results[0].name} returned an unchanged "
                "progress fingerprint",
            )


def _ok(rec: CallRecord) -> bool:
    return str(rec.outcome) == "ok"


def _read_only(tool: Tool) -> bool:
    if tool.action_effects is not None:
        return all(e is Effect.ReadOnly for e in tool.action_effects.values())
    return tool.declarations.effect is Effect.ReadOnly


def _json_object(arguments: str) -> bool:
    """Do the call's arguments parse as a JSON object (an empty string is the empty object)?"""
    if not arguments.strip():
        return True
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def _outer_cancelled() -> bool:
    task = asyncio.current_task()
    return bool(task is not None and task.cancelling())

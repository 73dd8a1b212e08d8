"""The Python API of the agent session::

    async with zuno.Runtime(root=".") as rt:
        async with rt.agent(model="local/qwen3-coder") as agent:
            result = await agent.run("fix the failing test")          # a RunResult
            async for event in agent.events("now run the linter"):    # text, tool calls, results, stop
                ...

``run`` drives turns until the session stops. A run that stops ``waiting_background`` on a job
this process started waits for the job and resumes the session when it ends (callback-first:
its completion notice reaches the next request).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zuno import limits
from zuno.agent.events import AgentEvent, StopReason, TurnResult
from zuno.agent.items import MODES, Mode
from zuno.agent.loop import AgentLoop
from zuno.agent.prompt_check import prompt_problem
from zuno.agent.transcript import Transcript
from zuno.store.paths import StoreUnusable

if TYPE_CHECKING:
    from zuno.agent.types import Provider
    from zuno.runtime import Runtime, Session


# The end recorded for a turn that a store locked by another process stopped (ended by the next run).
LOCKED_TURN_TEXT = (
    "the store was locked by another process during this turn: what the turn did after that was not "
    "recorded (a call left unsettled was settled as uncertain, not run again)"
)


class NoProvider(Exception):
    """No model is configured, or its provider cannot be built: the message names what to set."""


class NothingToResume(ValueError):
    """A run without a prompt of a session that has no agent conversation (a new one, or one made
    by ``zuno call``, ``zuno batch`` or the MCP server): there is nothing to continue."""


class AgentBusy(RuntimeError):
    """A run was started on an agent whose turn is still running: one turn at a time per session."""


def nothing_to_resume(runtime: Runtime, session_id: str | None) -> NothingToResume | None:
    """The NothingToResume for continuing ``session_id`` without a prompt when it has no agent
    conversation yet; None when it has one."""
    if session_id is not None and runtime.store.query(
        "SELECT 1 FROM agent_items WHERE session_id = ? LIMIT 1", (session_id,)
    ):
        return None
    which = f"session {session_id}" if session_id else "a new session"
    resume = f"zuno resume {session_id} \"…\"" if session_id else 'zuno run "…"'
    return NothingToResume(
        f"{which} has no agent conversation to continue (a session made by zuno call, zuno batch or the "
        f"MCP server has none): give a prompt, e.g. {resume}."
    )


class WaitingForInput(ValueError):
    """A run without a prompt of a session whose Goal waits for the user's answer to a required-input
    request (goal_request_input): a resume cannot bypass that wait; only the answer ends it."""


def waiting_for_input(runtime: Runtime, session_id: str | None) -> WaitingForInput | None:
    """The WaitingForInput for continuing ``session_id`` without a prompt while a required-input
    request is pending; None when none is."""
    from zuno.tools.state import goal_input

    pending = goal_input.pending_for(runtime.store, session_id) if session_id is not None else None
    if pending is None:
        return None
    return WaitingForInput(
        f"session {session_id} waits for your input (required-input request {pending['id']}: "
        f"{pending['question']!r}); a resume does not answer it. Answer it: zuno goal resume --session "
        f"{session_id} --input 'your answer', then zuno resume {session_id}."
    )


def build_provider_for(
    runtime: Runtime,
    model: str | None,
    *,
    background: bool = False,
    on_loaded: Callable[[], None] | None = None,
    where: str | None = None,
) -> Provider:
    """The configured provider of ``model`` (or the config's ``model``), through
    ``zuno.agent.providers.build_provider`` (its SDK loading in a thread with ``background``);
    NoProvider names what to set."""
    try:
        from zuno.agent.providers import build_provider
    except ImportError as e:  # the adapters are not installed in this build
        raise NoProvider(f"no provider adapters are available ({e}).") from None
    from zuno.config import ConfigError

    try:
        return build_provider(runtime.config, model, background=background, on_loaded=on_loaded, where=where)
    except ConfigError as e:
        raise NoProvider(str(e)) from None


@dataclass(slots=True)
class RunResult:
    session: str
    stop_reason: StopReason
    detail: str
    final_text: str
    steps: int
    turns: list[TurnResult] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0})

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "stop_reason": self.stop_reason,
            "detail": self.detail,
            "final_text": self.final_text,
            "steps": self.steps,
            "usage": dict(self.usage),
            "turns": len(self.turns),
        }


class Agent:
    def __init__(
        self,
        runtime: Runtime,
        *,
        model: str | None = None,
        mode: str | None = None,
        session_id: str | None = None,
        continue_latest: bool = False,
        provider: Provider | None = None,
        summary_provider: Provider | None = None,
        wait_background: bool = True,
        load_in_background: bool = False,
        on_loaded: Callable[[], None] | None = None,
    ) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}.")
        self.runtime = runtime
        self._model = model
        self._mode: Mode | None = mode  # type: ignore[assignment]
        self._session_id = runtime.resolve_session(session_id, continue_latest=continue_latest)
        self._provider = provider
        self._summary_provider = summary_provider
        self.wait_background = wait_background
        # The configured provider's SDK loads in a thread: open() does not wait for it, the first
        # request does (zuno run shows its prompt meanwhile). on_loaded runs once it is built.
        self._load_in_background = load_in_background
        self._on_loaded = on_loaded
        self.session: Session | None = None
        self.loop: AgentLoop | None = None
        self._listeners: list[Callable[[AgentEvent], None]] = []
        self._listener_error: Exception | None = None  # what an on_event listener raised in this run
        self._owned: list[Provider] = []
        self._running = False  # a run() is in progress (AgentBusy for a second one)
        # The last run stopped on a store another process kept locked: its turn is still open on
        # record, a call of it may be unsettled (see ``_after_lock``).
        self._locked_out = False

    @property
    def id(self) -> str:
        return self.session.id if self.session else ""

    async def open(self) -> Agent:
        if self.loop is not None:
            return self
        if self._provider is None:
            self._provider = build_provider_for(
                self.runtime, self._model, background=self._load_in_background, on_loaded=self._on_loaded
            )
            self._owned.append(self._provider)
        summary = self._summary_provider
        compaction_model = self.runtime.config.agent.compaction.model
        if summary is None and compaction_model:
            summary = build_provider_for(
                self.runtime,
                compaction_model,
                background=self._load_in_background,
                where="config key agent.compaction.model",
            )
            self._summary_provider = summary
            self._owned.append(summary)
        self.session = self.runtime.session(self._session_id)
        await self.session.open()
        warm = getattr(self._provider, "warm", None)  # optional: an embedder's provider may have none
        if warm is not None:
            await warm()
        self.loop = AgentLoop(self.session, self._provider, mode=self._mode, summary_provider=summary, emit=self._emit)
        self.loop.visible(self.loop.mode)  # the tools' schemas are exported once, before the first turn
        for provider in (self._provider, summary):
            start = getattr(provider, "start", None)  # a provider loading its SDK in a thread
            if start is not None:
                start()
        return self

    def _emit(self, event: AgentEvent) -> None:
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception as e:
                # The caller's own failure (zuno run's stdout closed by `| head`): it was taken for the
                # provider's ("provider … failed: BrokenPipeError", recorded so). The listener is
                # dropped, the turn is interrupted (nobody is watching it), and run() raises it.
                self._listeners.remove(fn)
                if self._listener_error is None:
                    self._listener_error = e
                if self.loop is not None:
                    self.loop.interrupt()

    def interrupt(self) -> None:
        if self.loop is not None:
            self.loop.interrupt()

    def set_mode(self, mode: Mode) -> None:
        assert self.loop is not None, "open the agent first"
        self.loop.set_mode(mode)

    @property
    def transcript(self) -> Transcript:
        assert self.loop is not None, "open the agent first"
        return self.loop.transcript

    async def run(
        self, prompt: str | None = None, *, on_event: Callable[[AgentEvent], None] | None = None
    ) -> RunResult:
        """Run the session until it stops. ``prompt`` None continues it where it stopped (a resume);
        NothingToResume when the session has no agent conversation to continue; WaitingForInput while
        its Goal waits for the answer to a required-input request."""
        if prompt is None:
            sid = self.session.id if self.session else self._session_id
            err = nothing_to_resume(self.runtime, sid) or waiting_for_input(self.runtime, sid)
            if err is not None:
                raise err
        elif not isinstance(prompt, str):
            raise TypeError(f"the prompt must be a str (or None to continue the session), not {type(prompt).__name__}")
        elif (problem := prompt_problem(prompt)) is not None:
            raise ValueError(f"the prompt {problem[:-1]}, or None to continue the session.")
        if self._running:
            raise AgentBusy(
                f"a turn is already running on this agent (session {self.id}): await it, or call "
                "agent.interrupt() and await it, before starting another run."
            )
        self._running = True
        try:
            await self.open()
        except BaseException:
            self._running = False
            raise
        assert self.loop is not None and self.session is not None
        if on_event is not None:
            self._listeners.append(on_event)
        self._listener_error = None
        try:
            self.runtime.store.wait_for_locks_again()  # a new run waits the whole busy wait for a lock
            if self._locked_out:
                self._after_lock()
            turns: list[TurnResult] = []
            t = await self.loop.run_turn(prompt, source="user" if prompt is not None else "resume")
            turns.append(t)
            started = time.monotonic()
            while t.stop_reason == "waiting_background" and self.wait_background and self.loop.local_jobs():
                left = limits.BACKGROUND_WAKE_MAX_S - (time.monotonic() - started)
                if left <= 0 or not await self._wait_jobs(left):
                    break
                t = await self.loop.run_turn(None, source="wake")
                turns.append(t)
            if self._listener_error is not None:  # the turn stopped for it (interrupted, recorded)
                raise self._listener_error
            usage = {k: sum(x.usage[k] for x in turns) for k in ("input_tokens", "output_tokens", "cached_tokens")}
            last = turns[-1]
            return RunResult(
                self.session.id,
                last.stop_reason,
                last.detail,
                last.final_text,
                sum(x.steps for x in turns),
                turns,
                usage,
            )
        except StoreUnusable:
            self._locked_out = True
            raise
        finally:
            self._running = False
            if on_event is not None and on_event in self._listeners:
                self._listeners.remove(on_event)

    def _after_lock(self) -> None:
        """The last run stopped on a store another process kept locked. Before this run goes on,
        what the next open of the session would do is done (the session stays open, its jobs run
        on): every call left unsettled is settled as uncertain, never run again, a notice naming
        it; the turn left open is ended as interrupted, saying why, and the streamed text saved of
        an answer whose outcome the lock kept from the record is recovered as an interrupted item
        (``Transcript.end_open_turns``). A store still locked is ``StoreLocked`` again (and this is
        tried again by the next run)."""
        assert self.session is not None
        self.session.recover()
        self.transcript.end_open_turns(LOCKED_TURN_TEXT)
        self._locked_out = False

    async def _wait_jobs(self, within_s: float) -> bool:
        """Wait for the first local job to end (its completion is queued as a notice: callback-first)."""
        assert self.loop is not None
        jobs = self.loop.local_jobs()
        waits = [asyncio.create_task(j.finished.wait()) for j in jobs]
        try:
            done, _ = await asyncio.wait(waits, timeout=within_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        return bool(done)

    async def events(self, prompt: str | None = None) -> AsyncIterator[AgentEvent]:
        """The run as an async stream of events, ending with its StopEvent(s)."""
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        task = asyncio.create_task(self.run(prompt, on_event=queue.put_nowait))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (ev := await queue.get()) is not None:
                yield ev
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def close(self) -> None:
        try:
            if self.session is not None:
                await self.session.close()
        finally:
            for p in self._owned:
                with contextlib.suppress(Exception):
                    await p.aclose()
            self._owned.clear()

    async def __aenter__(self) -> Agent:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

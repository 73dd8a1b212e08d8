"""The reconciliation driver after a provider final (the spec's "an ordinary final ends its cycle
…"): a background completion wakes the turn, an unsettled Job makes it wait (waiting_background),
an active Goal with runnable work is continued, observed for no_progress and bounded by
agent.limits.continuations; anything else is an ordinary final. A part of ``AgentLoop``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from zuno.agent.events import StopReason
from zuno.agent.items import Mode
from zuno.jobs import JobManager
from zuno.projection import ContextSection

if TYPE_CHECKING:
    from zuno.agent.loop import _Turn
    from zuno.agent.transcript import Transcript
    from zuno.config import Config
    from zuno.projection import GoalObserver
    from zuno.runtime import Session
    from zuno.store import Store


class Reconciliation:
    """What the driver reads of the loop it is part of."""

    transcript: Transcript
    store: Store
    session: Session
    config: Config
    goal_observers: Sequence[GoalObserver]
    last_request_id: int
    _sections: Callable[[], list[ContextSection]]

    def _reset_cycle(self) -> None:
        data = self.transcript.state().data
        data.update({"stagnant_key": None, "stagnant_count": 0})
        self.transcript.save_data(data)

    def _reconcile(self, turn: _Turn, mode: Mode) -> tuple[StopReason, str] | Literal["goal", "wake"]:
        """After a provider final: "goal" (a Goal continuation) or "wake" (a background completion
        arrived) to continue the turn, else why it stops."""
        sections = self._sections()  # the committed state after the final
        if self._completion_pending():
            return "wake"  # a background completion arrived meanwhile (callback-first)
        waiting = self._waiting_background(sections)
        if waiting is not None:
            # An unsettled Job is not bypassed by a Goal continuation: the turn waits for it (its
            # completion wakes the session) rather than asking the model again meanwhile.
            self.store.add_event(self.session.id, "waiting_background", {"detail": waiting})
            return "waiting_background", waiting
        goal = next((s for s in sections if s.goal_active), None)
        if mode == "goal" and goal is not None:
            observed = self._observe_goal()
            if observed is not None:
                return observed
            if any(s.runnable for s in sections):
                if turn.continuations >= self.config.agent.limits.continuations:
                    return "continuation_limit", (
                        f"{turn.continuations} continuations (agent.limits.continuations = "
                        f"{self.config.agent.limits.continuations})"
                    )
                return "goal"
        return "final", "an ordinary final ends the cycle; unfinished work stays as it is"

    def _observe_goal(self) -> tuple[StopReason, str] | None:
        """One observation of the active Goal (the state family's persisted no_progress rule,
        ``registry.goal_observers``), keyed by the request whose final is observed. A stop when it
        paused the Goal; an observer that fails pauses the turn, as a failed refresher does."""
        for observe in self.goal_observers:
            try:
                seen = observe(self.store, self.session.id, f"agent-request-{self.last_request_id}")
            except Exception as e:
                detail = f"the Goal's progress could not be observed: {type(e).__name__}: {e}"
                self.store.add_event(self.session.id, "goal-observe-failed", {"error": detail})
                return "context_refresh_failed", detail
            if seen is not None and seen.paused:
                detail = (
                    f"{seen.count} consecutive identical observations of the active Goal; it is paused until the "
                    "user resumes it (zuno goal resume, or /goal resume in the interactive session)"
                )
                self.store.add_event(
                    self.session.id, "goal-paused", {"reason": "no_progress", "observations": seen.count}
                )
                return "no_progress", detail
        return None

    def _completion_pending(self) -> bool:
        rows = self.store.query(
            "SELECT 1 FROM notices WHERE session_id = ? AND kind = 'job_completed' AND delivered_step IS NULL LIMIT 1",
            (self.session.id,),
        )
        return bool(rows)

    def _waiting_background(self, sections: Sequence[ContextSection]) -> str | None:
        if any(s.waiting_remote for s in sections):
            return "a remote observer is still running; its terminal report wakes the session"
        if self.local_jobs():
            return "a background job this process started is still running; its completion wakes the session"
        return None

    def local_jobs(self) -> list[Any]:
        jm = self.session.services.peek(JobManager)
        return [j for j in jm.jobs.values() if j.active] if jm is not None else []

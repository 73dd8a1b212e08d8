"""What belongs to one running step: its number, whether it was asked to stop, the tasks in which
its tools are running now, and whether it has ended. Admission, the running of calls and the step
itself share it; nothing here touches the store."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class StepState:
    """One running step. Several steps of one session may run at once (an MCP client sends
    requests concurrently): cancelling one settles only its own calls.

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
    # Tools of the surface that the caller did not offer for this step (an agent in Plan mode, a
    # model that takes no images), each with why: a call to one is refused as unavailable.
    hidden: dict[str, str] = field(default_factory=dict)

    def cancel(self) -> None:
        self.cancel_requested = True
        if self.asking is not None:
            self.asking.cancel()
        for t in list(self.running):
            self.running[t] += 1
            t.cancel()

    def absorb(self) -> None:
        """The step's own task was cancelled while it ran a call directly: take the cancellation
        as the step's (its calls stop and settle); the step re-raises it once recorded."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        self.outer_cancelled = True
        self.cancel()

    def take_back(self, task: asyncio.Task[Any], base: int, own: int, outer: bool) -> None:
        """Take back the cancellations of this task that the step sent (``own``) and, when one came
        from outside the step's own task (``outer``), that one too: the step absorbs it (its calls
        stop and settle) and re-raises it once recorded. The task is left as cancelled as it was
        before the tool ran (``base``)."""
        extra = task.cancelling() - base
        for _ in range(max(0, extra if outer else min(own, extra))):
            task.uncancel()
        if outer:
            self.outer_cancelled = True
            self.cancel()

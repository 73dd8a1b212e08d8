"""The dynamic context: sections rebuilt from the committed database before every provider
request (Jobs; Goal, Plan and Todo from the durable-state tools).

A tool family contributes a refresher with ``registry.refreshers.append((name, fn))`` in its
``register(registry)``. ``fn(store, session_id)`` returns a ContextSection, or None when it has
nothing to say; a refresher that raises makes ``build_sections`` raise ``RefreshFailed``, and the
agent loop then pauses the turn rather than send a stale snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from zuno.store import Store


@dataclass(frozen=True, slots=True)
class ContextSection:
    name: str  # "jobs", "goal", "plan", "todo", ...
    text: str  # what the model sees, at developer priority
    # This section holds runnable work that warrants an automatic continuation after a provider
    # final (an adopted, authorized in_progress Plan step; an active owned Goal; a runnable Todo).
    runnable: bool = False
    # Only a remote observer (backgroundPurpose: remoteObserver) keeps this section's work open:
    # the reconciliation driver records waiting_background.
    waiting_remote: bool = False
    # A semantic progress fingerprint of the state behind this section (stable JSON digest), for a
    # reader's own change detection; the no_progress rule is the Goal observer's (below).
    fingerprint: str = ""
    # A Goal that is active and owned by this session (continuation is retained while it is).
    goal_active: bool = False


Refresher = Callable[["Store", str], ContextSection | None]

class GoalObservation(Protocol):
    count: int  # consecutive identical observations, this one included
    paused: bool  # this observation paused the Goal with no_progress


# The tool family that owns the Goal registers its observer (``registry.goal_observers``): the one
# implementation of "an active owned Goal keeps a persisted progress fingerprint; three
# consecutive identical observations pause it with typed no_progress". The agent loop calls it
# once per reconciliation in Goal mode, ``fn(store, session_id, observation_id)`` (a repeated id
# is not counted twice); None when there is no active Goal.
GoalObserver = Callable[["Store", str, str], GoalObservation | None]


class RefreshFailed(Exception):
    """A refresher failed: the dynamic context cannot be rebuilt, so the turn pauses."""

    def __init__(self, name: str, cause: BaseException) -> None:
        super().__init__(f"the dynamic context section {name!r} could not be rebuilt: {type(cause).__name__}: {cause}")
        self.name = name
        self.cause = cause


def build_sections(refreshers: Sequence[tuple[str, Refresher]], store: Store, session_id: str) -> list[ContextSection]:
    out: list[ContextSection] = []
    for name, fn in refreshers:
        try:
            section = fn(store, session_id)
        except Exception as e:
            raise RefreshFailed(name, e) from e
        if section is not None:
            out.append(section)
    return out

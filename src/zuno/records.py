"""What a step hands back: one record per call, in call order, and the step's notices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zuno.declarations import BlockKind, Declarations, Outcome


@dataclass(slots=True)
class CallRecord:
    call_id: str
    name: str
    outcome: Outcome
    block_kind: BlockKind | None
    cancelled: bool
    text: str
    metadata: dict[str, Any]
    declarations: Declarations
    started_at: float | None
    ended_at: float | None
    attempt: int = 1
    seq: int | None = None  # the call's row in the store, once settled

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "outcome": str(self.outcome),
            "block_kind": str(self.block_kind) if self.block_kind else None,
            "cancelled": self.cancelled,
            "text": self.text,
            "metadata": self.metadata,
            "declarations": self.declarations.as_dict(),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


@dataclass(slots=True)
class StepResult:
    session: str
    step: int
    results: list[CallRecord]
    notices: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "step": self.step,
            "notices": self.notices,
            "results": [r.to_json() for r in self.results],
        }


@dataclass(slots=True)
class StepWrites:
    """Durable writes of a step's caller that belong with its results (an agent transcript's
    result items): ``write(db, step, records)`` runs inside the transaction that settles the
    step's last call, with every record (its ``seq`` set), in a savepoint: a write that raises is
    undone and kept in ``error``, and the step settles all the same. ``committed()`` is called
    once that transaction has committed; ``done`` tells the caller whether it was."""

    write: Callable[[Any, int, list[CallRecord]], None]
    committed: Callable[[], None]
    done: bool = False
    error: BaseException | None = None

"""The vocabulary of a call: three independent declarations, outcomes and block kinds.

Spelled exactly as the spec spells them. Anything undeclared takes the strictest value of
each declaration: SideEffecting, Never, Exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Effect(StrEnum):
    ReadOnly = "ReadOnly"
    UserMediated = "UserMediated"
    Delegating = "Delegating"
    SideEffecting = "SideEffecting"


class Replay(StrEnum):
    Never = "Never"
    Safe = "Safe"


class Concurrency(StrEnum):
    Exclusive = "Exclusive"
    ParallelSafe = "ParallelSafe"
    IsolatedBackground = "IsolatedBackground"


class Outcome(StrEnum):
    ok = "ok"
    error = "error"
    blocked = "blocked"
    uncertain = "uncertain"


class BlockKind(StrEnum):
    invalid_arguments = "invalid_arguments"
    unavailable = "unavailable"
    denied = "denied"


@dataclass(frozen=True, slots=True)
class Declarations:
    """What a call does (effect), whether it may run again (replay), and whether it may overlap
    (concurrency). The defaults are the strict ones."""

    effect: Effect = Effect.SideEffecting
    replay: Replay = Replay.Never
    concurrency: Concurrency = Concurrency.Exclusive

    def as_dict(self) -> dict[str, str]:
        return {"effect": str(self.effect), "replay": str(self.replay), "concurrency": str(self.concurrency)}


STRICT = Declarations()
READ_ONLY_PARALLEL = Declarations(Effect.ReadOnly, Replay.Safe, Concurrency.ParallelSafe)

"""What an agent run streams to its caller (the CLI's live view, the Python API's event stream)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# Why a turn stopped. "final" is an ordinary provider final (its cycle ends; unfinished work is
# never marked complete); the others are typed pauses and limits.
StopReason = Literal[
    "final",
    "interrupted",
    "waiting_background",
    "waiting_input",
    "step_limit",
    "token_limit",
    "time_limit",
    "continuation_limit",
    "max_output_tokens",
    "no_progress",
    "stagnant_tool_loop",
    "context_refresh_failed",
    "provider_error",
]


@dataclass(frozen=True, slots=True)
class TextEvent:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call_id: str
    name: str
    arguments: str
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultEvent:
    call_id: str
    name: str
    outcome: str
    text: str
    cancelled: bool = False
    block_kind: str | None = None  # invalid_arguments | unavailable | denied, for a blocked call
    exit_code: int | None = None  # a command's exit status, when the tool ran one
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class NoticeEvent:
    text: str
    source: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class RequestEvent:
    """A provider request went out (``phase`` "sent") or ended (``phase`` "ended"); "restarted":
    its stream broke after output began and it goes out again as attempt ``attempts`` — the text
    streamed since "sent" (or the last "restarted") is void (``detail`` says why)."""

    request_id: int
    purpose: str
    phase: Literal["sent", "ended", "restarted"]
    attempts: int = 0
    detail: str = ""
    kind: Literal["request"] = "request"


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    number: int
    summarised_items: int
    kind: Literal["compaction"] = "compaction"


@dataclass(frozen=True, slots=True)
class StopEvent:
    stop_reason: StopReason
    detail: str
    final_text: str
    turn: int
    kind: Literal["stop"] = "stop"


AgentEvent = TextEvent | ToolCallEvent | ToolResultEvent | NoticeEvent | RequestEvent | CompactionEvent | StopEvent


@dataclass(slots=True)
class TurnResult:
    session: str
    turn: int
    stop_reason: StopReason
    detail: str
    final_text: str
    steps: int
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0})

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "turn": self.turn,
            "stop_reason": self.stop_reason,
            "detail": self.detail,
            "final_text": self.final_text,
            "steps": self.steps,
            "usage": dict(self.usage),
        }

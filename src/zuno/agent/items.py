"""The items of an agent transcript as values: the session's durable state, one recorded item,
the rows and sources read from it, and their conversion to provider-neutral messages."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from zuno.agent.types import (
    AssistantMessage,
    ImagePart,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

Mode = Literal["plan", "work", "goal"]
MODES: tuple[Mode, ...] = ("plan", "work", "goal")

INTERRUPTED_MARK = "[interrupted: the response was cut off here; what follows it was never received]"
# The text streamed before the request failed (a provider error mid-stream) is sent back with this
# mark, so the model never takes a half answer for a complete one.
FAILED_MARK = (
    "[failed: the response was cut off here by an error ({category}); what follows it was never received]"
)
NOT_STARTED_RECOVERY_TEXT = (
    "[cancelled] The process driving the session stopped before this call started. Nothing ran; "
    "call it again if it is still needed."
)
SUMMARY_HEAD = "[Summary of the earlier conversation (compaction {n}); the transcript before it was replaced]"
NOTICE_HEAD = "[zuno notice: runtime information, not a message from the user]"


def digest_text(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


_ITEM_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once


def item_json(v: Any) -> str:
    """The compact JSON of an item's data (the ``data`` column)."""
    return _ITEM_JSON(v)


@dataclass(slots=True)
class AgentState:
    mode: Mode
    model: str | None
    turns: int
    data: dict[str, Any]


@dataclass(slots=True)
class Item:
    seq: int
    turn: int
    kind: str
    data: dict[str, Any]
    msg_id: str | None = None
    call_id: str | None = None
    request_id: int | None = None
    step: int | None = None
    call_seq: int | None = None
    digest: str | None = None
    at: float = 0.0


@dataclass(slots=True)
class ToolResultRow:
    call_id: str
    name: str
    text: str
    outcome: str
    call_seq: int | None
    images: Sequence[ImagePart] = ()
    recovered: bool = False
    cancelled: bool = False


@dataclass(slots=True)
class UserSource:
    msg_id: str
    digest: str
    text: str
    turn: int


@dataclass(slots=True)
class Unmatched:
    assistant_seq: int
    turn: int
    call: ToolCall
    calls_seq_floor: int


@dataclass(slots=True)
class RequestRow:
    id: int
    turn: int
    purpose: str
    status: str
    stop_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float | None = None
    error: str | None = None


def _images(data: Sequence[dict[str, Any]]) -> tuple[ImagePart, ...]:
    return tuple(ImagePart(d["media_type"], d["data_b64"]) for d in data)


def image_rows(images: Sequence[ImagePart]) -> list[dict[str, str]]:
    return [{"media_type": i.media_type, "data_b64": i.data_b64} for i in images]


def to_messages(items: Sequence[Item]) -> list[Message]:
    out: list[Message] = []
    for it in items:
        d = it.data
        if it.kind == "user":
            out.append(UserMessage(d["text"], _images(d.get("images", []))))
        elif it.kind == "notice":
            out.append(UserMessage(NOTICE_HEAD + "\n" + d["text"]))
        elif it.kind == "assistant":
            if d.get("failed"):
                mark = FAILED_MARK.format(category=d["failed"].get("category", "error"))
                out.append(AssistantMessage(text=d["text"] + "\n" + mark))
            elif d.get("interrupted"):
                out.append(AssistantMessage(text=d["text"] + "\n" + INTERRUPTED_MARK))
            else:
                calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in d["tool_calls"])
                out.append(AssistantMessage(text=d["text"], tool_calls=calls, opaque=tuple(d.get("opaque", ()))))
        elif it.kind == "tool_result":
            out.append(
                ToolResultMessage(
                    call_id=it.call_id or "",
                    name=d["name"],
                    text=d["text"],
                    is_error=d["outcome"] != "ok",
                    images=_images(d.get("images", [])),
                )
            )
    return out

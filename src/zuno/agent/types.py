"""The provider-neutral shapes the agent loop and the provider adapters share.

A provider adapter (``zuno.agent.providers.<api>``) turns a ``ModelRequest`` into one wire
request of its API through the official SDK, streams the answer back as ``StreamEvent``s, and
ends with exactly one ``Finished``. The loop never sees an SDK object; an adapter never sees the
dispatcher. Keys never appear in an event, an error or a log.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# -- the transcript ------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def well_formed(text: str) -> str:
    """``text`` as valid Unicode, which the store and the wire can carry: a surrogate pair split
    across two stream deltas (a server that cuts its text in UTF-16 code units sends each half as
    its own ``\\u`` escape) joined into its character, a lone surrogate U+FFFD."""
    return text if _valid(text) else text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def well_formed_json(text: str) -> str:
    """JSON text as valid Unicode: split surrogate pairs joined, a lone surrogate written as its
    ``\\u`` escape (the same JSON value: the dispatcher still refuses the argument, naming it)."""
    if _valid(text):
        return text
    joined = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", joined)


def _valid_value(v: Any) -> bool:
    if isinstance(v, str):
        return _valid(v)
    if isinstance(v, dict):
        return all(_valid(k) and _valid_value(x) for k, x in v.items())
    if isinstance(v, list | tuple):
        return all(_valid_value(x) for x in v)
    return True


def _well_formed_value(v: Any) -> Any:
    if isinstance(v, str):
        return well_formed(v)
    if isinstance(v, dict):
        return {well_formed(k): _well_formed_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_well_formed_value(x) for x in v]
    return v


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str  # the provider's call id (echoed back with the result)
    name: str
    arguments: str  # the raw JSON text the model sent (may be malformed: the dispatcher judges it)

    def __post_init__(self) -> None:
        if not (_valid(self.id) and _valid(self.name) and _valid(self.arguments)):
            object.__setattr__(self, "id", well_formed(self.id))
            object.__setattr__(self, "name", well_formed(self.name))
            object.__setattr__(self, "arguments", well_formed_json(self.arguments))


@dataclass(frozen=True, slots=True)
class ImagePart:
    media_type: str  # image/png, image/jpeg
    data_b64: str


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str
    images: tuple[ImagePart, ...] = ()
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    # Provider-specific opaque items that must be echoed back verbatim on the next request
    # (Responses reasoning items, Anthropic thinking blocks with signatures). Never shown, never
    # summarised, never returned by history.
    opaque: tuple[dict[str, Any], ...] = ()
    role: Literal["assistant"] = "assistant"

    def __post_init__(self) -> None:
        # What a server streamed may not be valid Unicode (see well_formed): made so here, once,
        # before anything records it, sends it back or prints it.
        if not _valid(self.text):
            object.__setattr__(self, "text", well_formed(self.text))
        if self.opaque and not _valid_value(self.opaque):
            object.__setattr__(self, "opaque", tuple(_well_formed_value(o) for o in self.opaque))


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    call_id: str
    name: str
    text: str  # exactly the record's text
    is_error: bool = False  # outcome other than ok
    images: tuple[ImagePart, ...] = ()
    role: Literal["tool"] = "tool"


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One model-visible tool, exported per provider from the same declarations."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HostedTool:
    """A provider-hosted tool (Chord's web_search through compat.hosted_tools)."""

    kind: Literal["web_search"]
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str  # the provider's model name (without the "<provider id>/" prefix)
    system: str  # instructions + the dynamic context, rebuilt for this request
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    hosted_tools: tuple[HostedTool, ...] = ()
    max_output_tokens: int | None = None
    parallel_tool_calls: bool = True


# -- the stream ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call began streaming (for a compact live line); its arguments come in Finished."""

    id: str
    name: str
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


# "paused": the provider paused a long server-side loop (Anthropic's pause_turn); sent back, it goes on.
StopReason = Literal["end_turn", "tool_calls", "max_tokens", "content_filter", "paused", "other"]


@dataclass(frozen=True, slots=True)
class Finished:
    """The request ended: the whole assistant message, usage and why it stopped."""

    message: AssistantMessage
    usage: Usage
    stop_reason: StopReason
    provider_stop_reason: str | None = None  # the wire value, for the record
    kind: Literal["finished"] = "finished"


@dataclass(frozen=True, slots=True)
class StreamRestarted:
    """The stream broke after output began, with a transient failure, and the request goes out
    again as attempt ``attempt`` (after ``wait_s``): what the broken attempt streamed is void, and
    the new attempt's events follow from the start."""

    attempt: int
    category: str
    wait_s: float
    kind: Literal["stream_restarted"] = "stream_restarted"


StreamEvent = TextDelta | ToolCallStarted | StreamRestarted | Finished


# -- attempts and errors -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """One wire attempt of a request, timed on its own (provider request/retry time is a
    different measurement from the task's elapsed time)."""

    number: int
    started_at: float
    ended_at: float
    status: int | None  # HTTP status, None for a connection failure
    error_category: str | None  # None for success; "rate_limited", "overloaded", "server", "connection", ...
    retry_after_s: float | None = None


class ProviderError(Exception):
    """A request that failed for good (after its retries, or at once when not transient).
    The message names the provider, the API and the category; never a key, never a header."""

    def __init__(
        self, message: str, *, category: str, status: int | None = None, attempts: tuple[Attempt, ...] = ()
    ) -> None:
        super().__init__(message)
        self.category = category
        self.status = status
        self.attempts = attempts


@dataclass(slots=True)
class RequestOutcome:
    """What the loop keeps of one request besides the streamed events: its attempts."""

    attempts: list[Attempt] = field(default_factory=list)


class Provider(Protocol):
    """One configured model. ``stream`` yields events and ends with one Finished; it raises
    ProviderError for a request that failed for good, and asyncio.CancelledError when cancelled
    (the partial text the caller has seen is the caller's to keep). A StreamRestarted voids what
    was streamed before it (the request is being sent again). ``outcome`` collects the attempts
    of this request."""

    id: str  # "<provider id>/<model name>"
    api: Literal["openai-chat", "openai-responses", "anthropic"]
    context_tokens: int
    output_tokens: int
    accepts_images: bool
    hosted_tools_supported: frozenset[str]

    def stream(self, request: ModelRequest, outcome: RequestOutcome) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...

"""Anthropic Messages through the official ``anthropic`` SDK, streaming always. Thinking blocks
(with their signatures) and hosted web-search blocks are kept opaque and echoed back first in
the assistant's content, as the API requires."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from zuno.agent.providers import wire_json
from zuno.agent.providers.base import HOSTED_TOOLS, ProviderSettings, StreamingProvider
from zuno.agent.providers.retry import RetryPolicy, StreamFailure
from zuno.agent.providers.schema_export import anthropic_tools
from zuno.agent.providers.sse import api_events, event_json
from zuno.agent.types import (
    AssistantMessage,
    Finished,
    ImagePart,
    Message,
    ModelRequest,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    ToolResultMessage,
    Usage,
    UserMessage,
)

OPAQUE_KEY = "anthropic"  # AssistantMessage.opaque entries: {"api": OPAQUE_KEY, "block": {...}}
NO_KEY = "no-key"  # sent when a configured (non built-in) provider has no key; see openai_chat.NO_KEY
# The API refuses empty and whitespace-only text blocks; an empty turn says so instead.
EMPTY_TEXT = "(empty)"

_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn", "stop_sequence": "end_turn", "tool_use": "tool_calls", "max_tokens": "max_tokens",
    "refusal": "content_filter", "model_context_window_exceeded": "max_tokens", "pause_turn": "paused",
}
_OPAQUE_BLOCKS = frozenset({"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"})


def _image(i: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data_b64}}


def _input_object(raw: str) -> dict[str, Any]:
    """The API wants tool_use input as an object; arguments that are not one (malformed JSON the
    model sent, already answered as blocked) go back as an empty object."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def anthropic_blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    """One message's role and content blocks."""
    if isinstance(m, UserMessage):
        blocks = [{"type": "text", "text": m.text}] if m.text.strip() else []
        blocks.extend(_image(i) for i in m.images)
        return "user", blocks or [{"type": "text", "text": EMPTY_TEXT}]
    if isinstance(m, ToolResultMessage):
        content: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text.strip() else []
        content.extend(_image(i) for i in m.images)
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.call_id, "content": content}
        if m.is_error:
            block["is_error"] = True
        return "user", [block]
    blocks = [o["block"] for o in m.opaque if o.get("api") == OPAQUE_KEY and isinstance(o.get("block"), dict)]
    if m.text.strip():
        blocks.append({"type": "text", "text": m.text})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _input_object(c.arguments)} for c in m.tool_calls
    )
    return "assistant", blocks or [{"type": "text", "text": EMPTY_TEXT}]


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Consecutive same-role messages merge into one turn (tool results and a following user
    text share one user turn; the API wants user and assistant to alternate)."""
    out: list[dict[str, Any]] = []
    for m in request.messages:
        role, blocks = anthropic_blocks(m)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})
    return out


def _blocks_bytes(m: Message) -> tuple[str, list[bytes]]:
    role, blocks = anthropic_blocks(m)
    return role, [wire_json.dumps(b) for b in blocks]


_ROLE = {"user": b'{"role":"user","content":[', "assistant": b'{"role":"assistant","content":['}


def _dump(block: Any) -> Any:
    """A content block as received, without its null fields (what is echoed back)."""
    if isinstance(block, dict):
        return {k: _dump(v) for k, v in block.items() if v is not None}
    if isinstance(block, list):
        return [_dump(v) for v in block]
    return block


class AnthropicProvider(StreamingProvider):
    api = "anthropic"
    hosted_tools_supported = HOSTED_TOOLS["anthropic"]

    def __init__(self, settings: ProviderSettings, retry: RetryPolicy | None = None) -> None:
        super().__init__(settings, retry)
        self._parts = wire_json.Parts()
        self._tools = wire_json.Once()
        self._grown = wire_json.Grown()
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key or NO_KEY,
            base_url=settings.base_url,
            default_headers=settings.headers or None,
            max_retries=0,
            timeout=anthropic.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s),
        )

    async def _events(self, stream: anthropic.AsyncStream[object]) -> AsyncIterator[Any]:
        """The JSON objects of a Messages stream, as the SDK's stream yields them (``ping`` and
        unnamed events skipped; an ``error`` event raises the SDK's own status error), read with
        the faster SSE reader; the response is closed in any case."""
        response = stream.response
        try:
            async for event, data in api_events(response):
                if event is None or event == "ping":
                    continue
                if event == "error":
                    body: Any = data
                    try:
                        body = json.loads(data)
                        message = f"{body}"
                    except ValueError:
                        message = data or f"Error code: {response.status_code}"
                    raise self._client._make_status_error(message, body=body, response=response)
                if data:
                    yield event_json(data)
        finally:
            await response.aclose()

    def _fields(self, request: ModelRequest, messages: Any, tools: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.settings.model,
            "messages": messages,
            "max_tokens": request.max_output_tokens or self.output_tokens,
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.tools or request.hosted_tools:
            body["tools"] = tools
            if request.tools and not request.parallel_tool_calls:
                body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        return body

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body as a dict (what ``body_bytes`` serialises)."""
        return self._fields(request, anthropic_messages(request), anthropic_tools(request.tools, request.hosted_tools))

    def body_bytes(self, request: ModelRequest) -> bytes:
        """``body`` serialised, each message's blocks once over the session (a request that extends
        the last one's messages serialises only the new ones), the tool schemas once per surface."""
        messages = request.messages
        start = self._grown.common(messages)
        closed: wire_json.Items  # the turns no later message can extend
        role, blocks = "", []  # the last turn, still open
        if start:
            closed, role, held = self._grown.state
            blocks = list(held)
        else:
            closed = wire_json.Items()
            self._parts.sweep(messages)
        self._grown.keep((), None)  # extended in place below: valid again only once complete
        for m in messages[start:]:
            r, b = self._parts.of(m, _blocks_bytes)
            if r != role and blocks:
                closed.add(_ROLE[role] + b",".join(blocks) + b"]}")
                blocks = []
            role = r
            blocks.extend(b)
        self._grown.keep(messages, (closed, role, blocks))
        last = _ROLE[role] + b",".join(blocks) + b"]}" if blocks else None
        tools = self._tools.get(
            (*request.tools, *request.hosted_tools),
            lambda: wire_json.dumps(anthropic_tools(request.tools, request.hosted_tools)),
        )
        return wire_json.body(self._fields(request, wire_json.array(closed, last), tools))

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # The SDK's own request path with the body already serialised (see openai_chat).
        stream = await self._client.post(
            "/v1/messages",
            content=self.body_bytes(request),
            cast_to=anthropic.types.Message,
            stream=True,
            # Each event as the JSON object the API documents (see openai_chat), read by
            # ``_events``, which raises the SDK's own error for an error event.
            stream_cls=anthropic.AsyncStream[object],
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        opaque: list[dict[str, Any]] = []
        blocks: dict[int, dict[str, Any]] = {}  # index -> the block being built
        partial: dict[int, list[str]] = {}
        usage_in = cached = out_tokens = 0
        stop_wire: str | None = None
        ended = False
        async with contextlib.aclosing(self._events(stream)) as events:
            async for ev in events:
                if not isinstance(ev, dict):
                    continue
                kind = ev.get("type")
                if kind == "message_start":
                    u = (ev.get("message") or {}).get("usage") or {}
                    cached = u.get("cache_read_input_tokens") or 0
                    usage_in = (u.get("input_tokens") or 0) + cached + (u.get("cache_creation_input_tokens") or 0)
                    out_tokens = u.get("output_tokens") or 0
                elif kind == "content_block_start":
                    block = _dump(ev.get("content_block") or {})
                    index = ev.get("index", 0)
                    blocks[index] = block
                    partial[index] = []
                    if block.get("type") == "tool_use":
                        yield ToolCallStarted(block.get("id") or "", block.get("name") or "")
                elif kind == "content_block_delta":
                    d = ev.get("delta") or {}
                    dkind = d.get("type")
                    index = ev.get("index", 0)
                    block = blocks.get(index, {})
                    if dkind == "text_delta":
                        text.append(d.get("text") or "")
                        yield TextDelta(d.get("text") or "")
                    elif dkind == "input_json_delta":
                        partial.setdefault(index, []).append(d.get("partial_json") or "")
                    elif dkind == "thinking_delta":
                        block["thinking"] = block.get("thinking", "") + (d.get("thinking") or "")
                    elif dkind == "signature_delta":
                        block["signature"] = block.get("signature", "") + (d.get("signature") or "")
                elif kind == "content_block_stop":
                    index = ev.get("index", 0)
                    block = blocks.pop(index, {})
                    raw = "".join(partial.pop(index, []))
                    btype = block.get("type")
                    if btype == "tool_use":
                        calls.append(
                            ToolCall(block.get("id") or "", block.get("name") or "",
                                     raw or json.dumps(block.get("input") or {}))
                        )
                    elif btype in _OPAQUE_BLOCKS:
                        if btype == "server_tool_use" and raw:
                            block["input"] = _input_object(raw)
                        opaque.append({"api": OPAQUE_KEY, "block": block})
                elif kind == "message_delta":
                    stop_wire = (ev.get("delta") or {}).get("stop_reason") or stop_wire
                    u = ev.get("usage")
                    if isinstance(u, dict) and u.get("output_tokens") is not None:
                        out_tokens = u["output_tokens"]
                elif kind == "message_stop":
                    ended = True
        if not ended:
            raise StreamFailure("connection", "the stream ended before message_stop")
        stop = _STOP.get(stop_wire or "", "other")
        yield Finished(
            AssistantMessage("".join(text), tuple(calls), tuple(opaque)),
            Usage(usage_in, out_tokens, cached),
            stop,
            stop_wire,
        )

    async def aclose(self) -> None:
        await self._client.close()

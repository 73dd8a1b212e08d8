"""OpenAI Responses through the official ``openai`` SDK: stateless (``store: false``), streaming
always; reasoning items and hosted web-search calls kept opaque and echoed back in order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
from openai.types.responses import Response, ResponseStreamEvent

from zuno.agent.providers import wire_json
from zuno.agent.providers.base import ProviderSettings, StreamingProvider
from zuno.agent.providers.openai_chat import data_url, openai_client
from zuno.agent.providers.retry import Failure, RetryPolicy, StreamFailure
from zuno.agent.providers.schema_export import responses_tools
from zuno.agent.types import (
    AssistantMessage,
    Finished,
    HostedTool,
    Message,
    ModelRequest,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    Usage,
    UserMessage,
)

OPAQUE_KEY = "openai-responses"  # AssistantMessage.opaque entries: {"api": OPAQUE_KEY, "item": {...}}

# Built-in model names that are reasoning models (their reasoning items are echoed back
# encrypted, as store=false requires); any other model says so with models.<name>.reasoning.

_INCOMPLETE: dict[str, StopReason] = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}
_FAILED_CODES = {"rate_limit_exceeded": "rate_limited", "server_error": "server", "vector_store_timeout": "timeout"}


def _item_dump(item: Any) -> dict[str, Any]:
    return item.model_dump(mode="json", exclude_none=True) if hasattr(item, "model_dump") else dict(item)


def _echo(item: dict[str, Any]) -> dict[str, Any] | None:
    """An output item as an input item of the next request (None when it cannot be echoed)."""
    kind = item.get("type")
    if kind == "reasoning":
        # Without store, a reasoning item is only meaningful with its encrypted content.
        if not item.get("encrypted_content"):
            return None
        return {k: v for k, v in item.items() if k in ("type", "id", "summary", "encrypted_content")}
    return item


def responses_items(m: Message) -> list[dict[str, Any]]:
    """One message's input items."""
    if isinstance(m, UserMessage):
        content: list[dict[str, Any]] = [{"type": "input_text", "text": m.text}] if m.text else []
        content.extend({"type": "input_image", "image_url": data_url(i)} for i in m.images)
        return [{"role": "user", "content": content or [{"type": "input_text", "text": ""}]}]
    if isinstance(m, AssistantMessage):
        out: list[dict[str, Any]] = []
        for o in m.opaque:
            if o.get("api") == OPAQUE_KEY and isinstance(o.get("item"), dict):
                echoed = _echo(o["item"])
                if echoed is not None:
                    out.append(echoed)
        if m.text:
            out.append({"role": "assistant", "content": m.text})
        out.extend(
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
        )
        return out
    output: str | list[dict[str, Any]] = m.text
    if m.images:
        output = [{"type": "input_text", "text": m.text}]
        output.extend({"type": "input_image", "image_url": data_url(i)} for i in m.images)
    return [{"type": "function_call_output", "call_id": m.call_id, "output": output}]


def responses_input(request: ModelRequest) -> list[dict[str, Any]]:
    return [item for m in request.messages for item in responses_items(m)]


def _items_bytes(m: Message) -> bytes:
    return b",".join(wire_json.dumps(i) for i in responses_items(m))


def _hosted(hosted: tuple[HostedTool, ...]) -> tuple[HostedTool, ...]:
    """OpenAI's web_search filters by allowed domains only: a blocked list is subtracted from the
    allowed one; a blocked list alone cannot be expressed (refused before sending)."""
    out = []
    for h in hosted:
        if h.blocked_domains and not h.allowed_domains:
            raise StreamFailure(
                "unsupported", "web_search on openai-responses takes allowed_domains only; blocked_domains "
                "cannot be expressed (use allowed_domains, or the anthropic api)",
            )
        allowed = tuple(d for d in h.allowed_domains if d not in set(h.blocked_domains))
        out.append(HostedTool(h.kind, allowed, ()))
    return tuple(out)


class OpenAIResponsesProvider(StreamingProvider):
    api = "openai-responses"
    hosted_tools_supported = frozenset({"web_search"})

    def __init__(self, settings: ProviderSettings, retry: RetryPolicy | None = None) -> None:
        super().__init__(settings, retry)
        self._client = openai_client(settings)
        self._parts = wire_json.Parts()
        self._tools = wire_json.Once()
        self._grown = wire_json.Grown()

    def _check(self, request: ModelRequest) -> None:
        super()._check(request)
        try:
            _hosted(request.hosted_tools)
        except StreamFailure as e:
            raise self._error(Failure(e.category, None, e.detail), ()) from None

    def _fields(self, request: ModelRequest, items: Any, tools: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.settings.model,
            "input": items,
            "stream": True,
            "store": False,
            "max_output_tokens": request.max_output_tokens or self.output_tokens,
        }
        if request.system:
            body["instructions"] = request.system
        if self.settings.reasoning:
            body["include"] = ["reasoning.encrypted_content"]
        if request.tools or request.hosted_tools:
            body["tools"] = tools
            body["parallel_tool_calls"] = request.parallel_tool_calls
        return body

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body as a dict (what ``body_bytes`` serialises)."""
        tools = responses_tools(request.tools, _hosted(request.hosted_tools))
        return self._fields(request, responses_input(request), tools)

    def body_bytes(self, request: ModelRequest) -> bytes:
        """``body`` serialised, each message's items once over the session (a request that extends
        the last one's messages serialises only the new ones), the tool schemas once per surface."""
        messages = request.messages
        start = self._grown.common(messages)
        items: wire_json.Items = self._grown.state if start else wire_json.Items()
        if not start:
            self._parts.sweep(messages)
        self._grown.keep((), None)  # extended in place below: valid again only once complete
        for m in messages[start:]:
            fragment = self._parts.of(m, _items_bytes)
            if fragment:
                items.add(fragment)
        self._grown.keep(messages, items)
        tools = self._tools.get(
            (*request.tools, *request.hosted_tools),
            lambda: wire_json.dumps(responses_tools(request.tools, _hosted(request.hosted_tools))),
        )
        return wire_json.body(self._fields(request, wire_json.array(items), tools))

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # The SDK's own request path with the body already serialised (see openai_chat).
        stream = await self._client.post(
            "/responses",
            content=self.body_bytes(request),
            cast_to=Response,
            stream=True,
            stream_cls=openai.AsyncStream[ResponseStreamEvent],
            options={"security": {"bearer_auth": True}},
        )
        text: list[str] = []
        args: dict[str, list[str]] = {}  # item id -> argument deltas
        calls: list[ToolCall] = []
        opaque: list[dict[str, Any]] = []
        final: Any = None
        async with stream:
            async for ev in stream:
                kind = getattr(ev, "type", None)
                if kind == "response.output_text.delta":
                    text.append(ev.delta)
                    yield TextDelta(ev.delta)
                elif kind == "response.output_item.added":
                    item = ev.item
                    if getattr(item, "type", None) == "function_call":
                        args[item.id or item.call_id] = []
                        yield ToolCallStarted(item.call_id, item.name)
                elif kind == "response.function_call_arguments.delta":
                    args.setdefault(ev.item_id, []).append(ev.delta)
                elif kind == "response.output_item.done":
                    item = ev.item
                    itype = getattr(item, "type", None)
                    if itype == "function_call":
                        streamed = args.get(item.id or item.call_id)
                        raw = "".join(streamed) if streamed else (item.arguments or "")
                        calls.append(ToolCall(item.call_id, item.name, raw or "{}"))
                    elif itype != "message":
                        opaque.append({"api": OPAQUE_KEY, "item": _item_dump(item)})
                elif kind in ("response.completed", "response.incomplete"):
                    final = ev.response
                elif kind == "response.failed":
                    err = getattr(ev.response, "error", None)
                    code = getattr(err, "code", None) or ""
                    raise StreamFailure(_FAILED_CODES.get(code, "server"),
                                        f"response failed: {getattr(err, 'message', None) or code or 'no detail'}")
                elif kind == "error":
                    code = getattr(ev, "code", None) or ""
                    raise StreamFailure(_FAILED_CODES.get(code, "server"),
                                        f"stream error: {getattr(ev, 'message', None) or code or 'no detail'}")
        if final is None:
            raise StreamFailure("connection", "the stream ended before response.completed")
        usage = Usage()
        if final.usage is not None:
            details = final.usage.input_tokens_details
            usage = Usage(final.usage.input_tokens or 0, final.usage.output_tokens or 0,
                          (details.cached_tokens or 0) if details is not None else 0)
        status = final.status or "completed"
        if status == "incomplete":
            reason = getattr(final.incomplete_details, "reason", None) or "incomplete"
            stop: StopReason = _INCOMPLETE.get(reason, "other")
            wire = f"incomplete:{reason}"
        else:
            stop = "tool_calls" if calls else "end_turn"
            wire = status
        yield Finished(AssistantMessage("".join(text), tuple(calls), tuple(opaque)), usage, stop, wire)

    async def aclose(self) -> None:
        await self._client.close()

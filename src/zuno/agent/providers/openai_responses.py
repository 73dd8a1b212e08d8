"""OpenAI Responses through the official ``openai`` SDK: stateless (``store: false``), streaming
always; reasoning items and hosted web-search calls kept opaque and echoed back in order."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import openai
from openai.types.responses import Response

from zuno.agent.providers import wire_json
from zuno.agent.providers.base import HOSTED_TOOLS, ProviderSettings, StreamingProvider
from zuno.agent.providers.openai_chat import data_url, openai_client, openai_events
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


def _item_dump(item: Any) -> Any:
    """An output item as received, without its null fields (what is echoed back)."""
    if isinstance(item, dict):
        return {k: _item_dump(v) for k, v in item.items() if v is not None}
    if isinstance(item, list):
        return [_item_dump(v) for v in item]
    return item


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
    hosted_tools_supported = HOSTED_TOOLS["openai-responses"]

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
            # Each event as the JSON object the API documents (see openai_chat): the SDK's typed
            # model of these events (three carry a whole response object) cost most of a step.
            stream_cls=openai.AsyncStream[object],
            options={"security": {"bearer_auth": True}},
        )
        text: list[str] = []
        args: dict[str, list[str]] = {}  # item id -> argument deltas
        calls: list[ToolCall] = []
        opaque: list[dict[str, Any]] = []
        final: dict[str, Any] | None = None
        async with contextlib.aclosing(openai_events(stream)) as events:
            async for ev in events:
                if not isinstance(ev, dict):
                    continue
                kind = ev.get("type")
                if kind == "response.output_text.delta":
                    delta = ev.get("delta") or ""
                    text.append(delta)
                    yield TextDelta(delta)
                elif kind == "response.output_item.added":
                    item = ev.get("item") or {}
                    if item.get("type") == "function_call":
                        args[item.get("id") or item.get("call_id") or ""] = []
                        yield ToolCallStarted(item.get("call_id") or "", item.get("name") or "")
                elif kind == "response.function_call_arguments.delta":
                    args.setdefault(ev.get("item_id") or "", []).append(ev.get("delta") or "")
                elif kind == "response.output_item.done":
                    item = ev.get("item") or {}
                    itype = item.get("type")
                    if itype == "function_call":
                        streamed = args.get(item.get("id") or item.get("call_id") or "")
                        raw = "".join(streamed) if streamed else (item.get("arguments") or "")
                        calls.append(ToolCall(item.get("call_id") or "", item.get("name") or "", raw or "{}"))
                    elif itype != "message":
                        opaque.append({"api": OPAQUE_KEY, "item": _item_dump(item)})
                elif kind in ("response.completed", "response.incomplete"):
                    final = ev.get("response") or {}
                elif kind == "response.failed":
                    err = (ev.get("response") or {}).get("error") or {}
                    code = err.get("code") or ""
                    raise StreamFailure(_FAILED_CODES.get(code, "server"),
                                        f"response failed: {err.get('message') or code or 'no detail'}")
                elif kind == "error":
                    code = ev.get("code") or ""
                    raise StreamFailure(_FAILED_CODES.get(code, "server"),
                                        f"stream error: {ev.get('message') or code or 'no detail'}")
        if final is None:
            raise StreamFailure("connection", "the stream ended before response.completed")
        usage = Usage()
        u = final.get("usage")
        if isinstance(u, dict):
            details = u.get("input_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            usage = Usage(u.get("input_tokens") or 0, u.get("output_tokens") or 0, cached or 0)
        status = final.get("status") or "completed"
        if status == "incomplete":
            reason = (final.get("incomplete_details") or {}).get("reason") or "incomplete"
            stop: StopReason = _INCOMPLETE.get(reason, "other")
            wire = f"incomplete:{reason}"
        else:
            stop = "tool_calls" if calls else "end_turn"
            wire = status
        yield Finished(AssistantMessage("".join(text), tuple(calls), tuple(opaque)), usage, stop, wire)

    async def aclose(self) -> None:
        await self._client.close()

"""OpenAI Chat Completions (and every server that speaks it: llama.cpp, vLLM, Ollama, LM Studio)
through the official ``openai`` SDK, streaming always."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from zuno.agent.providers import wire_json
from zuno.agent.providers.base import HOSTED_TOOLS, ProviderSettings, StreamingProvider
from zuno.agent.providers.retry import RetryPolicy, StreamFailure
from zuno.agent.providers.schema_export import chat_tools
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

# A key the SDK sends when the configuration gives none (local servers need none); it keeps the
# SDK from reading OPENAI_API_KEY and sending it to a server that is not OpenAI's.
NO_KEY = "no-key"

_STOP: dict[str, StopReason] = {
    "stop": "end_turn", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "max_tokens",
    "content_filter": "content_filter",
}


def data_url(image: ImagePart) -> str:
    return f"data:{image.media_type};base64,{image.data_b64}"


def openai_client(settings: ProviderSettings) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=settings.api_key or NO_KEY,
        base_url=settings.base_url,
        default_headers=settings.headers or None,
        max_retries=0,
        timeout=openai.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s),
    )


OPAQUE_KEY = "openai-chat"  # AssistantMessage.opaque entries: {"api": OPAQUE_KEY, "field": ..., "text": ...}
# The delta fields compatible servers stream a model's reasoning in (DeepSeek, llama.cpp and vLLM:
# reasoning_content; OpenRouter, Ollama and newer vLLM: reasoning). Never shown as the answer.
REASONING_FIELDS = ("reasoning_content", "reasoning")

# What ``openai_events`` yields for the ``[DONE]`` that ends a Chat Completions stream.
DONE = "[DONE]"


async def openai_events(stream: openai.AsyncStream[object]) -> AsyncIterator[Any]:
    """The JSON objects of an OpenAI stream, as the SDK's stream yields them (an object carrying
    ``error`` raises the SDK's APIError, ``[DONE]`` ends it and is yielded as ``DONE``), read
    with the faster SSE reader.
    The body is read to its end (connection reuse), and the response is closed in any case."""
    response = stream.response
    try:
        done = False
        async for _event, data in api_events(response):
            if done:
                continue
            if data.startswith("[DONE]"):
                done = True
                yield DONE
                continue
            obj = event_json(data)
            if isinstance(obj, dict) and obj.get("error"):
                error = obj["error"]
                message = error.get("message") if isinstance(error, dict) else None
                raise openai.APIError(
                    message if isinstance(message, str) and message else "An error occurred during streaming",
                    request=response.request,
                    body=error,
                )
            yield obj
    finally:
        await response.aclose()


def chat_entry(m: Message) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """One message's wire entry and, for a tool result with images, the parts of the user message
    that carries them (a tool message carries text only)."""
    if isinstance(m, ToolResultMessage):
        entry: dict[str, Any] = {"role": "tool", "tool_call_id": m.call_id, "content": m.text}
        if not m.images:
            return entry, None
        parts: list[dict[str, Any]] = [{"type": "text", "text": f"Images from tool call {m.call_id}:"}]
        parts.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in m.images)
        return entry, parts
    if isinstance(m, UserMessage):
        if m.images:
            content = [{"type": "text", "text": m.text}] if m.text else []
            content.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in m.images)
            return {"role": "user", "content": content}, None
        return {"role": "user", "content": m.text}, None
    # content may be null only beside tool calls
    entry = {"role": "assistant", "content": (m.text or None) if m.tool_calls else m.text}
    if m.tool_calls:
        # The reasoning of an answer with tool calls goes back in its own field: DeepSeek's thinking
        # mode refuses (400) a later request without it; servers that sent it take it back.
        extras: dict[str, Any] = {}
        mine = [o for o in m.opaque if o.get("api") == OPAQUE_KEY]
        details = next((o["details"] for o in mine if isinstance(o.get("details"), list)), None)
        for o in mine:
            # With structured details (OpenRouter), they alone go back: "reasoning" is their text.
            if o.get("field") in REASONING_FIELDS and isinstance(o.get("text"), str):
                if details is None or o["field"] != "reasoning":
                    entry[o["field"]] = o["text"]
            elif isinstance(o.get("call_extra"), dict):
                extras = o["call_extra"]
        if details is not None:
            entry["reasoning_details"] = details
        entry["tool_calls"] = [_call_entry(c, extras.get(c.id)) for c in m.tool_calls]
    return entry, None


def _call_entry(c: ToolCall, extra: Any) -> dict[str, Any]:
    """A tool call as sent back: with the ``extra_content`` the server attached to it (Gemini's
    thought signature, which its OpenAI-compatible endpoint refuses a later request without)."""
    entry: dict[str, Any] = {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
    if isinstance(extra, dict):
        entry["extra_content"] = extra
    return entry


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The messages in wire order: the images of a run of tool messages follow that run in one
    user message (the tool messages must directly follow the assistant's tool calls)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    pending: list[dict[str, Any]] = []
    for m in request.messages:
        entry, images = chat_entry(m)
        if pending and not isinstance(m, ToolResultMessage):
            out.append({"role": "user", "content": pending})
            pending = []
        out.append(entry)
        pending.extend(images or ())
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def _entry_bytes(m: Message) -> tuple[bytes, bytes | None]:
    entry, images = chat_entry(m)
    return wire_json.dumps(entry), (b",".join(wire_json.dumps(p) for p in images) if images is not None else None)


def _user_of(runs: list[bytes]) -> bytes:
    return b'{"role":"user","content":[' + b",".join(runs) + b"]}"


def _add_details(details: dict[tuple[str, int], dict[str, Any]], pieces: list[Any]) -> None:
    """Stream pieces of OpenRouter's ``reasoning_details`` into whole entries, one per type and
    index: their text, summary and (encrypted) data are concatenated, other fields (id, format,
    signature) take the latest value. The entries go back as they came, on tool-calling answers."""
    for piece in pieces:
        if not isinstance(piece, dict) or not isinstance(piece.get("type"), str):
            continue
        index = piece.get("index") if isinstance(piece.get("index"), int) else 0
        whole = details.setdefault((piece["type"], index), {"type": piece["type"], "index": index})
        for k, v in piece.items():
            if v is None or k in ("type", "index"):
                continue
            if k in ("text", "summary", "data") and isinstance(v, str):
                whole[k] = whole.get(k, "") + v
            else:
                whole[k] = v


def _unindexed(calls: dict[int, _Building], tc: dict[str, Any]) -> int:
    """The index of a tool-call delta that has none (some compatible servers and proxies): a new
    call when it has an id of its own, or a name after a call that already has its name and
    arguments; else a piece of the last call's arguments."""
    if not calls:
        return 0
    last_index = max(calls)
    last = calls[last_index]
    fn = tc.get("function")
    named = isinstance(fn, dict) and bool(fn.get("name"))
    if (tc.get("id") and tc["id"] != last.id) or (not tc.get("id") and named and last.name and last.arguments):
        return last_index + 1
    return last_index


@dataclass
class _Building:
    id: str
    name: str
    arguments: str = ""
    announced: bool = False
    extra: dict[str, Any] | None = None  # the server's extra_content (Gemini: the thought signature)


class OpenAIChatProvider(StreamingProvider):
    api = "openai-chat"
    hosted_tools_supported = HOSTED_TOOLS["openai-chat"]

    def __init__(self, settings: ProviderSettings, retry: RetryPolicy | None = None, *,
                 builtin: bool = False) -> None:
        super().__init__(settings, retry)
        self._client = openai_client(settings)
        # OpenAI itself wants max_completion_tokens; the compatible servers know max_tokens.
        self._max_key = "max_completion_tokens" if builtin else "max_tokens"
        self._parts = wire_json.Parts()
        self._tools = wire_json.Once()
        self._grown = wire_json.Grown()
        # The field this server streams reasoning in, once it has: a later tool-calling answer with
        # no reasoning is sent back with an empty one (DeepSeek refuses the request otherwise).
        self._reasoning_field: str | None = None
        self._reasoning_scanned = 0  # messages of the history already looked at for it

    def _fields(self, request: ModelRequest, messages: Any, tools: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.settings.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            self._max_key: request.max_output_tokens or self.output_tokens,
        }
        if request.tools:
            body["tools"] = tools
            body["parallel_tool_calls"] = request.parallel_tool_calls
        return body

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body as a dict (what ``body_bytes`` serialises)."""
        return self._fields(request, chat_messages(request), chat_tools(request.tools) if request.tools else None)

    def body_bytes(self, request: ModelRequest) -> bytes:
        """``body`` serialised, each message's entry once over the session (a request that extends
        the last one's messages serialises and copies only the new ones), the tool schemas once
        per surface."""
        messages = request.messages
        start = self._grown.common(messages)
        done: wire_json.Items
        pending: list[bytes]
        if start:
            done, pending = self._grown.state
        else:
            done, pending = wire_json.Items(), []
            self._parts.sweep(messages)
        self._grown.keep((), None)  # extended in place below: valid again only once complete
        for m in messages[start:]:
            entry, images = self._parts.of(m, _entry_bytes)
            if pending and not isinstance(m, ToolResultMessage):
                done.add(_user_of(pending))
                pending = []
            done.add(entry)
            if images is not None:
                pending.append(images)
        self._grown.keep(messages, (done, pending))
        system = b'{"role":"system","content":' + wire_json.dumps(request.system) + b"}" if request.system else None
        wire = wire_json.array(system, done, _user_of(pending) if pending else None)
        tools = None
        if request.tools:
            tools = self._tools.get(request.tools, lambda: wire_json.dumps(chat_tools(request.tools)))
        return wire_json.body(self._fields(request, wire, tools))

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # The official SDK's own request path (auth, headers, errors, SSE parsing) with the body
        # already serialised: its typed-parameter transform would walk the whole history again
        # for every request, and it leaves these plain JSON bodies unchanged.
        stream = await self._client.post(
            "/chat/completions",
            content=self.body_bytes(request),
            cast_to=ChatCompletion,
            stream=True,
            # Each chunk as the JSON object the API documents, read by ``openai_events`` (the SDK's
            # own stream is never iterated); building its typed model of every chunk costs more
            # than the rest of a step.
            stream_cls=openai.AsyncStream[object],
            options={"security": {"bearer_auth": True}},
        )
        text: list[str] = []
        reasoning: dict[str, list[str]] = {}
        reasoning_details: dict[tuple[str, int], dict[str, Any]] = {}  # OpenRouter's, in pieces
        calls: dict[int, _Building] = {}
        usage = Usage()
        finish: str | None = None
        completed = False
        async with contextlib.aclosing(openai_events(stream)) as chunks:
            async for chunk in chunks:
                if not isinstance(chunk, dict):
                    completed = completed or chunk is DONE
                    continue
                u = chunk.get("usage")
                if isinstance(u, dict):
                    details = u.get("prompt_tokens_details")
                    cached = details.get("cached_tokens") if isinstance(details, dict) else None
                    usage = Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0, cached or 0)
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    content = delta.get("content")
                    if content:
                        text.append(content)
                        yield TextDelta(content)
                    for field in REASONING_FIELDS:
                        thought = delta.get(field)
                        if thought and isinstance(thought, str):
                            reasoning.setdefault(field, []).append(thought)
                            self._reasoning_field = field
                    if isinstance(delta.get("reasoning_details"), list):
                        _add_details(reasoning_details, delta["reasoning_details"])
                    for tc in delta.get("tool_calls") or ():
                        index = tc.get("index")
                        if index is None:
                            index = _unindexed(calls, tc)
                        b = calls.get(index)
                        if b is None:
                            b = calls[index] = _Building(id=tc.get("id") or "", name="")
                        if tc.get("id") and not b.id:
                            b.id = tc["id"]
                        if isinstance(tc.get("extra_content"), dict):
                            b.extra = {**(b.extra or {}), **tc["extra_content"]}
                        fn = tc.get("function")
                        if isinstance(fn, dict):
                            if fn.get("name") and not b.announced:
                                b.name += fn["name"]
                            piece = fn.get("arguments")
                            if piece:  # a string; some local servers send the arguments' object itself
                                b.arguments += piece if isinstance(piece, str) else json.dumps(piece)
                        if b.name and not b.announced:
                            b.announced = True
                            if not b.id:
                                b.id = f"call_{index}"
                            yield ToolCallStarted(b.id, b.name)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        if finish is None and not completed:
            # Neither a finish_reason nor [DONE]: the answer broke off (a transient failure, as a
            # Responses or Messages stream without its final event), never a complete final.
            raise StreamFailure("connection", "the stream ended before a finish_reason or [DONE]")
        tool_calls = tuple(
            ToolCall(b.id or f"call_{i}", b.name, b.arguments or "{}") for i, b in sorted(calls.items())
        )
        stop = _STOP.get(finish or "", "other")
        if tool_calls and stop == "end_turn":
            stop = "tool_calls"  # some compatible servers say "stop" after tool calls
        if tool_calls and not reasoning and (field := self._known_reasoning_field(request.messages)) is not None:
            reasoning[field] = []
        opaque = tuple({"api": OPAQUE_KEY, "field": f, "text": "".join(parts)} for f, parts in reasoning.items())
        if reasoning_details:
            opaque += ({"api": OPAQUE_KEY, "details": list(reasoning_details.values())},)
        extras = {c.id: b.extra for c, (_, b) in zip(tool_calls, sorted(calls.items()), strict=True) if b.extra}
        if extras:
            opaque += ({"api": OPAQUE_KEY, "call_extra": extras},)
        yield Finished(AssistantMessage("".join(text), tool_calls, opaque), usage, stop, finish)

    def _known_reasoning_field(self, messages: Sequence[Message]) -> str | None:
        """The field this server streams reasoning in: seen in this process, or in an answer of
        the history (a resumed session). Each message is looked at once (the history only grows;
        a compaction that shortens it starts the look again)."""
        if self._reasoning_field is None:
            start = self._reasoning_scanned if self._reasoning_scanned <= len(messages) else 0
            for m in messages[start:]:
                for o in m.opaque if isinstance(m, AssistantMessage) else ():
                    if o.get("api") == OPAQUE_KEY and o.get("field") in REASONING_FIELDS:
                        self._reasoning_field = o["field"]
            self._reasoning_scanned = len(messages)
        return self._reasoning_field

    async def aclose(self) -> None:
        await self._client.close()


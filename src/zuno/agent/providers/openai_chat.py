"""OpenAI Chat Completions (and every server that speaks it: llama.cpp, vLLM, Ollama, LM Studio)
through the official ``openai`` SDK, streaming always."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import openai

from zuno.agent.providers.base import ProviderSettings, StreamingProvider
from zuno.agent.providers.retry import RetryPolicy
from zuno.agent.providers.schema_export import chat_tools
from zuno.agent.types import (
    AssistantMessage,
    Finished,
    ImagePart,
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


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    pending_images: list[tuple[str, tuple[ImagePart, ...]]] = []

    def flush_images() -> None:
        # A tool message carries text only: its images follow, in one user message, after the
        # run of tool messages (which must directly follow the assistant's tool calls).
        if pending_images:
            parts: list[dict[str, Any]] = []
            for call_id, images in pending_images:
                parts.append({"type": "text", "text": f"Images from tool call {call_id}:"})
                parts.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in images)
            out.append({"role": "user", "content": parts})
            pending_images.clear()

    for m in request.messages:
        if isinstance(m, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": m.text})
            if m.images:
                pending_images.append((m.call_id, m.images))
            continue
        flush_images()
        if isinstance(m, UserMessage):
            if m.images:
                parts = [{"type": "text", "text": m.text}] if m.text else []
                parts.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in m.images)
                out.append({"role": "user", "content": parts})
            else:
                out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            # content may be null only beside tool calls
            entry: dict[str, Any] = {"role": "assistant", "content": (m.text or None) if m.tool_calls else m.text}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls
                ]
            out.append(entry)
    flush_images()
    return out


@dataclass
class _Building:
    id: str
    name: str
    arguments: str = ""
    announced: bool = False


class OpenAIChatProvider(StreamingProvider):
    api = "openai-chat"
    hosted_tools_supported = frozenset()

    def __init__(self, settings: ProviderSettings, retry: RetryPolicy | None = None, *,
                 builtin: bool = False) -> None:
        super().__init__(settings, retry)
        self._client = openai_client(settings)
        # OpenAI itself wants max_completion_tokens; the compatible servers know max_tokens.
        self._max_key = "max_completion_tokens" if builtin else "max_tokens"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.settings.model,
            "messages": chat_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            self._max_key: request.max_output_tokens or self.output_tokens,
        }
        if request.tools:
            body["tools"] = chat_tools(request.tools)
            body["parallel_tool_calls"] = request.parallel_tool_calls
        return body

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        stream = await self._client.chat.completions.create(**self.body(request))
        text: list[str] = []
        calls: dict[int, _Building] = {}
        usage = Usage()
        finish: str | None = None
        async with stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    u = chunk.usage
                    details = u.prompt_tokens_details
                    usage = Usage(u.prompt_tokens or 0, u.completion_tokens or 0,
                                  (details.cached_tokens or 0) if details is not None else 0)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for tc in (delta.tool_calls if delta is not None else None) or ():
                        index = tc.index if tc.index is not None else len(calls)
                        b = calls.get(index)
                        if b is None:
                            b = calls[index] = _Building(id=tc.id or "", name="")
                        if tc.id and not b.id:
                            b.id = tc.id
                        if tc.function is not None:
                            if tc.function.name and not b.announced:
                                b.name += tc.function.name
                            if tc.function.arguments:
                                b.arguments += tc.function.arguments
                        if b.name and not b.announced:
                            b.announced = True
                            if not b.id:
                                b.id = f"call_{index}"
                            yield ToolCallStarted(b.id, b.name)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        tool_calls = tuple(
            ToolCall(b.id or f"call_{i}", b.name, b.arguments or "{}") for i, b in sorted(calls.items())
        )
        stop = _STOP.get(finish or "", "other")
        if tool_calls and stop == "end_turn":
            stop = "tool_calls"  # some compatible servers say "stop" after tool calls
        yield Finished(AssistantMessage("".join(text), tool_calls), usage, stop, finish)

    async def aclose(self) -> None:
        await self._client.close()


"""An in-process Provider (a test double of Zuno's own Provider protocol, not of any SDK) that
plays a script: each request gets the next reply, or the reply a function computes from it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from zuno.agent.types import (
    AssistantMessage,
    Attempt,
    Finished,
    ModelRequest,
    RequestOutcome,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    Usage,
)


@dataclass
class Reply:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    chunk_delay: float = 0.0
    chunks: int = 1
    usage: Usage = field(default_factory=lambda: Usage(100, 20, 0))
    stop: str | None = None


def say(text: str, **kw: Any) -> Reply:
    return Reply(text=text, **kw)


_n = [0]


def call(name: str, arguments: Any = None, *, id: str | None = None) -> ToolCall:
    _n[0] += 1
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id or f"tc_{_n[0]}", name, raw)


def calls(*cs: ToolCall, text: str = "") -> Reply:
    return Reply(text=text, calls=list(cs))


class ScriptedProvider:
    api = "openai-chat"

    def __init__(
        self,
        script: list[Reply] | Callable[[ModelRequest, int], Reply],
        *,
        id: str = "test/scripted",
        context_tokens: int = 200_000,
        accepts_images: bool = False,
        hosted: frozenset[str] = frozenset(),
    ) -> None:
        self.id = id
        self.context_tokens = context_tokens
        self.output_tokens = 1024
        self.accepts_images = accepts_images
        self.hosted_tools_supported = hosted
        self.script = script
        self.requests: list[ModelRequest] = []
        self.closed = False
        self.deltas_sent = 0  # text deltas yielded, over all streams
        self.streams_finished = 0  # streams read to their Finished event

    def _next(self, request: ModelRequest) -> Reply:
        i = len(self.requests) - 1
        if callable(self.script):
            return self.script(request, i)
        if i >= len(self.script):
            return Reply(text="(script ended)")
        return self.script[i]

    async def stream(self, request: ModelRequest, outcome: RequestOutcome) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        reply = self._next(request)
        t0 = time.time()
        outcome.attempts.append(Attempt(1, t0, t0, 200, None))
        text = reply.text
        if text:
            size = max(1, len(text) // reply.chunks)
            for i in range(0, len(text), size):
                if reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)
                self.deltas_sent += 1
                yield TextDelta(text[i : i + size])
        for c in reply.calls:
            yield ToolCallStarted(c.id, c.name)
        stop = reply.stop or ("tool_calls" if reply.calls else "end_turn")
        self.streams_finished += 1
        yield Finished(AssistantMessage(text=text, tool_calls=tuple(reply.calls)), reply.usage, stop)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        self.closed = True

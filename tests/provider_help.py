"""Helpers for the provider tests: an adapter of each API pointed at the fake server."""

from __future__ import annotations

from collections.abc import Callable

from zuno.agent.providers import ProviderSettings, RetryPolicy, StreamingProvider, provider_from_settings
from zuno.agent.types import (
    Finished,
    ModelRequest,
    RequestOutcome,
    StreamEvent,
    TextDelta,
    ToolSpec,
    UserMessage,
)

from fake_provider import FakeProvider

APIS = ("openai-chat", "openai-responses", "anthropic")
SECRET = "sk-SECRET-7f3a9c1e5b"
HEADER_SECRET = "hdr-SECRET-0d2e4f"
FAST = RetryPolicy(backoff_base_s=0.01, backoff_max_s=0.05)

READ = ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}},
                                         "required": ["path"]})


def make(fake: FakeProvider, api: str, retry: RetryPolicy = FAST, **kw: object) -> StreamingProvider:
    url = fake.root_url if api == "anthropic" else fake.base_url
    settings = ProviderSettings("fake", "m1", api, url, api_key=SECRET,  # type: ignore[arg-type]
                                headers={"X-Team-Token": HEADER_SECRET}, **kw)  # type: ignore[arg-type]
    return provider_from_settings(settings, retry)


def request(text: str = "hi", **kw: object) -> ModelRequest:
    return ModelRequest("m1", "be brief", (UserMessage(text),), **kw)  # type: ignore[arg-type]


async def collect(provider: StreamingProvider, req: ModelRequest,
                  outcome: RequestOutcome | None = None) -> list[StreamEvent]:
    return [e async for e in provider.stream(req, outcome if outcome is not None else RequestOutcome())]


def finished(events: list[StreamEvent]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return last


def texts(events: list[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


Maker = Callable[..., StreamingProvider]

"""What every adapter shares: its settings, the retry loop around one wire attempt, and the
errors it raises (naming the provider id, the API and the category — never a key, a header or
the URL)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import random
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from zuno import limits
from zuno.agent.providers.advice import refusal_advice
from zuno.agent.providers.retry import Failure, RetryPolicy, classify
from zuno.agent.types import (
    Attempt,
    Finished,
    ModelRequest,
    ProviderError,
    RequestOutcome,
    StreamEvent,
    StreamRestarted,
)

# Built-in openai model names that are reasoning models (their encrypted reasoning is asked for).
REASONING_MODEL = re.compile(r"^(o\d|gpt-5|codex)")

log = logging.getLogger("zuno.agent.providers")

Api = Literal["openai-chat", "openai-responses", "anthropic"]

# The provider-hosted tools each API can carry (known without importing its SDK).
HOSTED_TOOLS: dict[str, frozenset[str]] = {
    "openai-chat": frozenset(),
    "openai-responses": frozenset({"web_search"}),
    "anthropic": frozenset({"web_search"}),
}

# What the wire client may wait for, unless the provider's options say otherwise: to connect,
# and between two streamed bytes.
CONNECT_TIMEOUT_S = limits.PROVIDER_CONNECT_TIMEOUT_DEFAULT_MS / 1000
READ_TIMEOUT_S = limits.PROVIDER_TIMEOUT_DEFAULT_MS / 1000


@dataclass(frozen=True)
class ProviderSettings:
    """One resolved model of one configured provider. ``api_key`` and ``headers`` are secret:
    they are kept out of ``repr`` and out of every message."""

    provider_id: str
    model: str
    api: Api
    base_url: str | None
    api_key: str | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    context_tokens: int = 128_000
    output_tokens: int = 8_192
    accepts_images: bool = False
    # openai-responses: ask for (and echo) encrypted reasoning items; unsupported by some models.
    reasoning: bool = False
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S
    # Wire attempts per request (the first included); None: the retry policy's own.
    max_attempts: int | None = None
    # The environment variable a built-in provider id reads its key from (named in a refusal).
    env_key: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.api_key, *self.headers.values()) if s)


# Loaded by the SDK's HTTP stack on its first request (anyio's backend, through httpcore's lock).
WARM_MODULES = ("anyio._backends._asyncio",)


def load_warm_modules() -> None:
    """Import what the first request would: the first connection's lock imports anyio's asyncio
    backend (tens of ms)."""
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # another layout of the HTTP stack: it loads what it needs itself
            continue


class StreamingProvider(ABC):
    """The Provider protocol of ``zuno.agent.types``; a subclass implements ``_attempt`` (one
    wire request through its SDK, as a stream of events ending with one Finished)."""

    api: ClassVar[Api]
    hosted_tools_supported: frozenset[str] = frozenset()

    def __init__(self, settings: ProviderSettings, retry: RetryPolicy | None = None) -> None:
        self.settings = settings
        policy = retry or RetryPolicy()
        if settings.max_attempts is not None:
            policy = dataclasses.replace(policy, max_attempts=settings.max_attempts)
        self.retry = policy
        self.id = f"{settings.provider_id}/{settings.model}"
        self.context_tokens = settings.context_tokens
        self.output_tokens = settings.output_tokens
        self.accepts_images = settings.accepts_images
        self._rng = random.Random()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} api={self.api}>"

    async def warm(self) -> None:
        """What the SDK's HTTP stack would otherwise load during the first request, loaded when
        the agent opens (``load_warm_modules``)."""
        load_warm_modules()

    @abstractmethod
    def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    def _check(self, request: ModelRequest) -> None:
        """Refuse, before any wire attempt, a request this API cannot express."""
        for hosted in request.hosted_tools:
            if hosted.kind not in self.hosted_tools_supported:
                raise self._error(
                    Failure("unsupported", None, f"the hosted tool {hosted.kind} is not offered by this API"), ()
                )

    def _error(
        self, failure: Failure, attempts: tuple[Attempt, ...], *, retries_ran_out: bool = False
    ) -> ProviderError:
        tries = f" after {len(attempts)} attempts" if len(attempts) > 1 else ""
        pid = self.settings.provider_id
        msg = (
            f"provider {pid} ({self.api}, model {self.settings.model}): "
            f"{failure.category}{tries} — {failure.detail}"
        )
        advice = refusal_advice(failure.category, failure.status, pid, self.settings.model, self.settings.env_key)
        if advice:
            msg = msg.rstrip(".") + ". " + advice
        if retries_ran_out:
            # Name the knobs (a slow local server may want a longer timeout, or more retries).
            msg += f". Retries: provider.{pid}.options.maxRetries = {self.retry.max_attempts - 1}"
            if failure.category == "timeout":
                msg += (
                    f"; the wait for the server's next byte: provider.{pid}.options.timeout = "
                    f"{round(self.settings.read_timeout_s * 1000)} ms"
                )
        return ProviderError(msg, category=failure.category, status=failure.status, attempts=attempts)

    async def stream(self, request: ModelRequest, outcome: RequestOutcome) -> AsyncIterator[StreamEvent]:
        self._check(request)
        number = 0
        while True:
            number += 1
            started = time.time()
            yielded = done = False
            try:
                async with aclosing(self._attempt(request)) as events:
                    async for event in events:
                        if isinstance(event, Finished):
                            # Recorded before the caller sees it: a caller may stop reading at
                            # Finished and never resume this generator.
                            outcome.attempts.append(Attempt(number, started, time.time(), 200, None))
                            done = True
                        yielded = True
                        yield event
                        if done:
                            return
            except asyncio.CancelledError:
                if not done:
                    outcome.attempts.append(Attempt(number, started, time.time(), None, "cancelled"))
                raise
            except GeneratorExit:
                if not done:
                    outcome.attempts.append(Attempt(number, started, time.time(), None, "closed"))
                raise
            except Exception as exc:
                failure = classify(exc, self.settings.secrets)
                if failure is None:
                    raise
                ended = time.time()
                outcome.attempts.append(
                    Attempt(number, started, ended, failure.status, failure.category, failure.retry_after_s)
                )
                if not failure.transient or number >= self.retry.max_attempts:
                    if yielded:
                        failure = Failure(failure.category, failure.status, failure.detail + " (after output began)")
                    raise self._error(failure, tuple(outcome.attempts), retries_ran_out=failure.transient) from None
                wait = self.retry.delay(number, failure.retry_after_s, self._rng)
                log.info(
                    "provider %s (%s): attempt %d failed (%s%s); retrying in %.2fs",
                    self.settings.provider_id, self.api, number, failure.category,
                    ", after output began" if yielded else "", wait,
                )
                if yielded:
                    # Output already reached the caller: it is told that it is void before the
                    # next attempt streams from the start.
                    yield StreamRestarted(number + 1, failure.category, wait)
                await asyncio.sleep(wait)
                continue
            # The attempt's stream ended without a Finished: the adapter raises for that, so
            # this is a stream of an API that ended cleanly but said nothing more.
            failure = Failure("protocol", 200, "the stream ended without a final message")
            outcome.attempts.append(Attempt(number, started, time.time(), 200, failure.category))
            raise self._error(failure, tuple(outcome.attempts))

    async def aclose(self) -> None:
        return None

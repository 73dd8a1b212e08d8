"""A provider whose SDK loads in a thread while the session starts.

The official SDKs are slow to import (the anthropic SDK builds thousands of pydantic types: seconds
of CPU on a small machine). An interactive ``zuno run`` need not wait for that before it shows its
prompt: the person types while the SDK loads. ``DeferredProvider`` answers everything the session
asks of a provider before its first request from the resolved settings alone (its id, API, window,
images, hosted tools), and builds the real adapter in a daemon thread from ``start()`` (the agent
calls it once the rest of its open is done); its first ``stream`` awaits that build without
blocking the event loop (Ctrl-C and the spinner still work).

The build is the same ``provider_from_settings`` the eager path runs, then the HTTP stack's warm-up.
A failed build (an SDK that will not import) is raised by ``stream`` and ``wait`` as a ProviderError
(category ``unavailable``) naming the SDK's error, so the turn stops with ``provider_error``.
``on_loaded`` runs in the thread when the build ends, either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from zuno.agent.providers.base import HOSTED_TOOLS, ProviderSettings, StreamingProvider, load_warm_modules
from zuno.agent.providers.retry import RetryPolicy
from zuno.agent.types import ModelRequest, ProviderError, RequestOutcome, StreamEvent


class DeferredProvider:
    """The Provider protocol over an adapter being built in a thread (see the module docstring)."""

    def __init__(
        self,
        settings: ProviderSettings,
        retry: RetryPolicy | None = None,
        *,
        builtin: bool = False,
        on_loaded: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.id = f"{settings.provider_id}/{settings.model}"
        self.api = settings.api
        self.context_tokens = settings.context_tokens
        self.output_tokens = settings.output_tokens
        self.accepts_images = settings.accepts_images
        self.hosted_tools_supported = HOSTED_TOOLS[settings.api]
        self._future: concurrent.futures.Future[StreamingProvider] = concurrent.futures.Future()
        self._retry, self._builtin, self._on_loaded = retry, builtin, on_loaded
        self._thread = threading.Thread(target=self._build, name=f"zuno-load-{settings.api}", daemon=True)
        self._started = False
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Begin the build (idempotent). The agent calls it at the end of its open, so the build's
        thread does not share the interpreter with the rest of the session's start."""
        with self._start_lock:
            if not self._started:
                self._started = True
                self._thread.start()

    def __repr__(self) -> str:
        state = "loaded" if self._future.done() else "loading"
        return f"<DeferredProvider {self.id} api={self.api} {state}>"

    def _build(self) -> None:
        try:
            from zuno.agent.providers.registry import provider_from_settings

            provider = provider_from_settings(self.settings, self._retry, builtin=self._builtin)
            load_warm_modules()
        except Exception as e:  # delivered to whoever awaits the provider, as a value it can show
            self._future.set_exception(
                ProviderError(
                    f"provider {self.id} ({self.api}): its SDK could not be loaded ({type(e).__name__}: {e}). "
                    "Reinstall Zuno with its dependencies.",
                    category="unavailable",
                )
            )
        except BaseException as e:
            self._future.set_exception(e)
        else:
            self._future.set_result(provider)
        finally:
            if self._on_loaded is not None:
                self._on_loaded()

    @property
    def loaded(self) -> bool:
        return self._future.done()

    async def wait(self) -> StreamingProvider:
        """The adapter, once built (at once if it is); raises what its build raised."""
        self.start()
        return await asyncio.wrap_future(self._future)

    async def stream(self, request: ModelRequest, outcome: RequestOutcome) -> AsyncIterator[StreamEvent]:
        provider = await self.wait()
        async with aclosing(provider.stream(request, outcome)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        # A build still running is not waited for: nothing was ever sent through its client, so
        # it holds no connection (the daemon thread ends with the process).
        if not self._future.done() or self._future.exception() is not None:
            return
        await self._future.result().aclose()

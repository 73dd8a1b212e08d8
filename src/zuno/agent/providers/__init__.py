"""Model providers: one adapter per wire API, through the official SDKs (re-exports only).

The adapter classes are re-exported lazily: importing this package imports no SDK; building a
provider imports the one its API needs.
"""

from typing import Any

from zuno.agent.providers.base import ProviderSettings, StreamingProvider
from zuno.agent.providers.registry import BUILT_IN, build_provider, provider_from_settings, resolve_settings
from zuno.agent.providers.retry import MAX_ATTEMPTS, RetryPolicy, parse_retry_after

_ADAPTERS = {
    "AnthropicProvider": "zuno.agent.providers.anthropic_messages",
    "OpenAIChatProvider": "zuno.agent.providers.openai_chat",
    "OpenAIResponsesProvider": "zuno.agent.providers.openai_responses",
}


def __getattr__(name: str) -> Any:
    if name in _ADAPTERS:
        import importlib

        return getattr(importlib.import_module(_ADAPTERS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILT_IN",
    "MAX_ATTEMPTS",
    "AnthropicProvider",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "ProviderSettings",
    "RetryPolicy",
    "StreamingProvider",
    "build_provider",
    "parse_retry_after",
    "provider_from_settings",
    "resolve_settings",
]

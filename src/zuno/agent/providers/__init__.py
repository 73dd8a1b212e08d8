"""Model providers: one adapter per wire API, through the official SDKs (re-exports only)."""

from zuno.agent.providers.anthropic_messages import AnthropicProvider
from zuno.agent.providers.base import ProviderSettings, StreamingProvider
from zuno.agent.providers.openai_chat import OpenAIChatProvider
from zuno.agent.providers.openai_responses import OpenAIResponsesProvider
from zuno.agent.providers.registry import BUILT_IN, build_provider, provider_from_settings, resolve_settings
from zuno.agent.providers.retry import MAX_ATTEMPTS, RetryPolicy, parse_retry_after

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

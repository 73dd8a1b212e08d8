"""From the config's ``model`` and ``provider`` keys to one adapter, or a ConfigError naming what
to set."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zuno.agent.providers.base import REASONING_MODEL, Api, ProviderSettings, StreamingProvider
from zuno.agent.providers.deferred import DeferredProvider
from zuno.agent.providers.retry import RetryPolicy
from zuno.config import Config, ConfigError, ProviderConfig, unset_env_error

APIS: tuple[Api, ...] = ("openai-chat", "openai-responses", "anthropic")

# A model that its provider's ``models`` does not list gets these.
GENERIC_CONTEXT_TOKENS = 128_000
GENERIC_OUTPUT_TOKENS = 8_192


@dataclass(frozen=True)
class BuiltIn:
    api: Api
    key_env: str
    context_tokens: int
    output_tokens: int
    images: bool


BUILT_IN: dict[str, BuiltIn] = {
    "openai": BuiltIn("openai-responses", "OPENAI_API_KEY", 128_000, 16_384, True),
    "anthropic": BuiltIn("anthropic", "ANTHROPIC_API_KEY", 200_000, 8_192, True),
}

_EXAMPLE = '"model": "anthropic/claude-sonnet-4-5" (with ANTHROPIC_API_KEY set)'


def resolve_settings(
    config: Config,
    model_override: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    where: str | None = None,
) -> ProviderSettings:
    """``where``: what an error calls ``model_override`` (default ``--model``), e.g. the config key
    it was read from."""
    env = os.environ if environ is None else environ
    ref = model_override or config.model
    where = (where or "--model") if model_override else "config key model"
    if not ref:
        raise ConfigError(
            f"no model is configured: set {_EXAMPLE} in zuno.json, or pass --model PROVIDER/MODEL; "
            "a local server needs provider.<id> with api and options.baseURL (see docs/models.md)."
        )
    if not model_override and (err := unset_env_error("model", ref)) is not None:
        raise err
    pid, sep, name = ref.partition("/")
    if not sep or not pid or not name:
        raise ConfigError(f"{where} = {ref!r}: expected \"<provider id>/<model name>\", e.g. {_EXAMPLE}.")
    pconf = config.provider.get(pid) or ProviderConfig()
    builtin = BUILT_IN.get(pid)
    if builtin is None and pid not in config.provider:
        known = sorted(set(config.provider) | set(BUILT_IN))
        raise ConfigError(
            f"{where} = {ref!r}: no provider {pid!r} is configured (known: {', '.join(known)}). "
            f"Add provider.{pid} with api ({' | '.join(APIS)}) and options.baseURL."
        )
    opts = pconf.options
    values = {"baseURL": opts.baseURL, "apiKey": opts.apiKey.get_secret_value() if opts.apiKey else None}
    values.update({f"headers.{k}": v.get_secret_value() for k, v in opts.headers.items()})
    for sub, value in values.items():
        err = unset_env_error(f"provider.{pid}.options.{sub}", value)
        if err is not None:
            raise err
    api = pconf.api or (builtin.api if builtin else None)
    if api is None:
        raise ConfigError(f"config key provider.{pid}.api is not set: allowed {' | '.join(APIS)}.")
    base_url = pconf.options.baseURL
    if base_url is None and builtin is None:
        raise ConfigError(
            f"config key provider.{pid}.options.baseURL is not set: name the server, e.g. \"http://127.0.0.1:8080/v1\"."
        )
    if base_url is not None:
        check_base_url(pid, base_url)
    key = pconf.options.apiKey.get_secret_value() if pconf.options.apiKey is not None else None
    if key is None and builtin is not None:
        key = env.get(builtin.key_env) or None
        if key is None:
            raise ConfigError(
                f"provider {pid} has no key: set {builtin.key_env}, or config key provider.{pid}.options.apiKey "
                f"(e.g. \"{{env:{builtin.key_env}}}\")."
            )
    mconf = pconf.models.get(name)
    context = (mconf.context if mconf else None) or (builtin.context_tokens if builtin else GENERIC_CONTEXT_TOKENS)
    given = mconf.output if mconf else None
    output = given or (builtin.output_tokens if builtin else GENERIC_OUTPUT_TOKENS)
    if not given and output >= context:  # a small context and no output given: a quarter of it
        output = max(1, context // 4)
    if output >= context:
        raise ConfigError(
            f"config key provider.{pid}.models.{name}: output = {output} is not below context = {context}: "
            "the answer's budget must leave room for the request. "
            f"Set output below context (e.g. {max(1, context // 4)}) or raise context."
        )
    images = mconf.images if mconf is not None and mconf.images is not None else bool(builtin and builtin.images)
    reasoning = mconf.reasoning if mconf is not None and mconf.reasoning is not None else bool(
        api == "openai-responses" and pid == "openai" and REASONING_MODEL.match(name)
    )
    return ProviderSettings(
        provider_id=pid,
        model=name,
        api=api,
        base_url=base_url,
        api_key=key,
        headers={k: v.get_secret_value() for k, v in pconf.options.headers.items()},
        context_tokens=context,
        output_tokens=output,
        accepts_images=images,
        reasoning=reasoning,
        connect_timeout_s=opts.connectTimeout / 1000,
        read_timeout_s=opts.timeout / 1000,
        max_attempts=opts.maxRetries + 1,
        env_key=builtin.key_env if builtin is not None and pconf.options.apiKey is None else None,
    )


# Paths the SDKs add to the base URL themselves: a base URL that already ends with one is the
# address of an endpoint, not of the API.
ENDPOINT_PATHS = ("/chat/completions", "/responses", "/messages")


def check_base_url(pid: str, base_url: str) -> None:
    """A ConfigError when ``base_url`` is not an http(s) URL with a host, or ends with an
    endpoint's path. The value is never quoted: it may have been read from the environment."""
    key = f"config key provider.{pid}.options.baseURL"
    example = '"http://127.0.0.1:8080/v1"'
    try:
        parts = urllib.parse.urlsplit(base_url.strip())
        host = parts.hostname
    except ValueError:
        raise ConfigError(f"{key} is not a URL: give the server's address, e.g. {example}.") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(f"{key} must start with http:// or https://, e.g. {example}.")
    if not host:
        raise ConfigError(f"{key} names no host: give the server's address, e.g. {example}.")
    path = parts.path.rstrip("/")
    for endpoint in ENDPOINT_PATHS:
        if path.endswith(endpoint):
            raise ConfigError(
                f"{key} ends with the endpoint path {endpoint}, which the SDK adds itself: "
                f"drop it (the API's address, e.g. {example})."
            )


def provider_from_settings(
    settings: ProviderSettings, retry: RetryPolicy | None = None, *, builtin: bool = False
) -> StreamingProvider:
    # Each adapter (and so its SDK) is imported only when a provider of its API is built.
    if settings.api == "openai-chat":
        from zuno.agent.providers.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(settings, retry, builtin=builtin)
    if settings.api == "openai-responses":
        from zuno.agent.providers.openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(settings, retry)
    from zuno.agent.providers.anthropic_messages import AnthropicProvider

    return AnthropicProvider(settings, retry)


def build_provider(
    config: Config,
    model_override: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    retry: RetryPolicy | None = None,
    background: bool = False,
    on_loaded: Callable[[], None] | None = None,
    where: str | None = None,
) -> StreamingProvider | DeferredProvider:
    """The Provider for ``model_override`` (``--model``) or the config's ``model``; a ConfigError
    naming what to set when no model, provider, api, base URL or key is configured. With
    ``background`` the settings are resolved (and their errors raised) here, and the SDK loads in
    a thread (``DeferredProvider``; ``on_loaded`` runs when it is built). ``where`` names where
    ``model_override`` came from in an error (default ``--model``)."""
    settings = resolve_settings(config, model_override, environ, where=where)
    builtin = settings.provider_id in BUILT_IN and settings.base_url is None
    if background:
        return DeferredProvider(settings, retry, builtin=builtin, on_loaded=on_loaded)
    return provider_from_settings(settings, retry, builtin=builtin)

"""Building the configured provider, running a batch of queries in parallel, filtering domains.

Keys come from the environment when a search runs: ``"api_key": "{env:NAME}"`` or
``"api_key_env": "NAME"`` (the config loader does not expand ``{env:...}`` itself, so this
module looks the variable up). A missing key is a failure naming the variable, never a value.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from zuno.config import WebSearchConfig, WebSearchProviderConfig
from zuno.connect.web_search import brave, searxng, tavily
from zuno.connect.web_search.base import Endpoint, Hit, Provider, Requester, SearchFailure

_ENV_REF = re.compile(r"^\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")
_DEFAULT_BASE = {"brave": brave.DEFAULT_BASE_URL, "tavily": tavily.DEFAULT_BASE_URL}
_PATH = {"brave": brave.PATH, "searxng": searxng.PATH, "tavily": tavily.PATH}


class NotConfigured(Exception):
    """web_search has no usable provider; the message names the config key to set."""


def _unsendable(key: str) -> bool:
    """A control character (a line break, a NUL) cannot go into a header: the request would fail
    as if the provider broke the protocol."""
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in key)


def _key(name: str, cfg: WebSearchProviderConfig, environ: Mapping[str, str]) -> str | None:
    var: str | None = None
    if cfg.api_key_env:
        var = cfg.api_key_env
    elif cfg.api_key:
        m = _ENV_REF.match(cfg.api_key)
        if not m:
            if _unsendable(cfg.api_key):
                raise NotConfigured(
                    f"web_search.providers.{name}.api_key contains a line break or another control character, "
                    "which cannot be sent in a header. Write the key alone."
                )
            return cfg.api_key
        var = m.group(1)
    if var is None:
        return None
    value = environ.get(var)
    if not value:
        raise NotConfigured(
            f"web_search.providers.{name}: the environment variable {var} that holds its API key is not set."
        )
    if _unsendable(value):
        # Named, never shown: the value is the key.
        raise NotConfigured(
            f"web_search.providers.{name}: the environment variable {var} that holds its API key contains a line "
            "break or another control character (a trailing newline from a file?), which cannot be sent in a "
            f"header. Set {var} to the key alone."
        )
    return value


def choose(config: WebSearchConfig) -> tuple[str, WebSearchProviderConfig]:
    if not config.providers:
        raise NotConfigured(
            "web_search has no provider: configure one under web_search.providers in zuno.json, e.g. "
            '{"brave": {"type": "brave", "api_key": "{env:BRAVE_API_KEY}"}} or '
            '{"searx": {"type": "searxng", "base_url": "http://127.0.0.1:8888"}}.'
        )
    name = config.provider
    if name is None:
        if len(config.providers) > 1:
            raise NotConfigured(
                f"web_search.provider: several providers are configured ({', '.join(sorted(config.providers))}); "
                "name the one to use."
            )
        name = next(iter(config.providers))
    if name not in config.providers:
        raise NotConfigured(f"web_search.provider = {name!r} is not one of web_search.providers.")
    return name, config.providers[name]


def build_provider(config: WebSearchConfig, environ: Mapping[str, str]) -> Provider:
    name, cfg = choose(config)
    base = (cfg.base_url or _DEFAULT_BASE.get(cfg.type) or "").rstrip("/")
    if not base:
        raise NotConfigured(f"web_search.providers.{name}.base_url: a {cfg.type} provider needs its base URL.")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.query:
        raise NotConfigured(
            f"web_search.providers.{name}.base_url must be an http(s) URL without credentials or a query string."
        )
    try:
        port = parts.port
    except ValueError:
        raise NotConfigured(
            f"web_search.providers.{name}.base_url has a port that is not a number from 0 to 65535; fix its port."
        ) from None
    endpoint = Endpoint(name, parts.scheme, parts.hostname, (parts.path or "") + _PATH[cfg.type], port)
    key = _key(name, cfg, environ)
    timeout_s = cfg.timeout_ms / 1000
    if cfg.type == "searxng":
        return searxng.SearxngProvider(name, endpoint, base, key, timeout_s)
    if key is None:
        raise NotConfigured(
            f"web_search.providers.{name}: a {cfg.type} provider needs an API key "
            '("api_key": "{env:NAME}" or "api_key_env": "NAME").'
        )
    if cfg.type == "brave":
        return brave.BraveProvider(name, endpoint, base, key, timeout_s)
    return tavily.TavilyProvider(name, endpoint, base, key, timeout_s)


def _ascii_host(host: str) -> str:
    """A host name as webfetch spells it: IDNA 2008 with UTS 46 mapping (``faß.de`` is
    ``xn--fa-hia.de``, not IDNA 2003's ``fass.de``), lower case, no trailing dot — the one parser's
    reading, so a domain entry and a result's URL are compared as the host a fetch would reach."""
    from zuno.tools.web.errors import UrlRefused  # not at import: zuno.tools.web imports this module
    from zuno.tools.web.urls import parse_target

    try:
        return parse_target(f"http://{host}/").host
    except UrlRefused:
        return host


def _norm_domain(d: str) -> str:
    """A domain entry as the host it names: written as a URL (``https://example.com/docs``), with a
    path (``example.com/docs``) or a port, or as ``*.example.com``, it is still ``example.com`` (an
    entry that named a URL matched nothing, so a blocked one blocked nothing)."""
    d = d.strip().lower()
    if "://" in d:
        try:
            d = urlsplit(d).hostname or ""
        except ValueError:
            return d
    else:
        d = d.split("/", 1)[0]
        host, sep, port = d.rpartition(":")
        if sep and port.isdigit() and host and ":" not in host:
            d = host
    return _ascii_host(d.lstrip(".").removeprefix("*.").rstrip("."))


def _in(host: str, domains: list[str]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def hit_host(url: str) -> str | None:
    """The host a result's URL names, read by webfetch's own parser; None when that parser refuses
    the URL. ``urlsplit`` read ``https://evil.com\\@example.com/`` as example.com (a browser goes to
    evil.com: a backslash ends the host) and ``https://example%2ecom/`` as no known domain."""
    from zuno.tools.web.errors import UrlRefused
    from zuno.tools.web.urls import encode_location, parse_target

    try:
        return parse_target(encode_location(url)).host  # a raw space in its path is no reason to drop it
    except UrlRefused:
        return None


def filter_hits(hits: list[Hit], allowed: list[str], blocked: list[str]) -> list[Hit]:
    allow = [_norm_domain(d) for d in allowed if d.strip()]
    block = [_norm_domain(d) for d in blocked if d.strip()]
    if not allow and not block:
        return list(hits)
    out = []
    for h in hits:
        # A URL whose host cannot be told for certain (refused by the one parser: a backslash,
        # userinfo, an escaped host, no http(s) scheme) is left out when any filter applies.
        host = hit_host(h.url)
        if not host or (allow and not _in(host, allow)) or _in(host, block):
            continue
        out.append(h)
    return out


async def search_batch(
    provider: Provider,
    queries: list[str],
    count: int,
    request: Requester,
    allowed: list[str],
    blocked: list[str],
) -> list[list[Hit] | SearchFailure]:
    """Every query at once; one failing query does not cancel the others."""

    async def one(q: str) -> list[Hit] | SearchFailure:
        try:
            hits = await provider.search(q, count, request)
        except SearchFailure as f:
            return f
        return filter_hits(hits, allowed, blocked)[:count]

    return list(await asyncio.gather(*(one(q) for q in queries)))

"""The provider interface and its one failure shape.

A ``SearchFailure`` carries exactly what diagnostics may show — provider, scheme, host, path,
status and error category — and its text is built from those fields alone, so an API key, an
authorization header, a full wire URL, a query string or the query itself cannot reach an
error, a log line or the durable record. Providers never put an underlying exception's text
into one (those often quote the URL).
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from zuno import limits

log = logging.getLogger("zuno.web_search")

# Categories whose failure may pass: the runtime may retry the (Safe) call after a backoff.
TRANSIENT_CATEGORIES = frozenset({"rate_limited", "server", "timeout", "connect"})


@dataclass(frozen=True, slots=True)
class Hit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a provider's API is, as diagnostics may show it (no query string, no credentials)."""

    provider: str
    scheme: str
    host: str
    path: str
    port: int | None = None  # only when the base URL names one: two local endpoints differ by it

    def describe(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.provider} ({self.scheme}://{host}{port}{self.path})"


class SearchFailure(Exception):
    def __init__(
        self,
        endpoint: Endpoint,
        category: str,
        status: int | None = None,
        hint: str = "",
        retry_after_s: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.category = category
        self.status = status
        self.retry_after_s = retry_after_s
        if not hint and category == "auth":
            hint = f"Check its API key (web_search.providers.{endpoint.provider}: api_key or api_key_env)."
        if retry_after_s is not None and retry_after_s > max(limits.SAFE_RETRY_BACKOFF_S):
            hint = (
                f"{hint} " if hint else ""
            ) + f"It asks to wait {retry_after_s:.0f} s before trying again (Retry-After), so it was not retried."
        self.hint = hint
        status_text = f", HTTP {status}" if status is not None else ""
        tail = f" {hint}" if hint else ""
        super().__init__(f"web_search provider {endpoint.describe()} failed: {category}{status_text}.{tail}")

    @property
    def transient(self) -> bool:
        # A retry sooner than the provider asked for would only be refused again.
        if self.retry_after_s is not None and self.retry_after_s > max(limits.SAFE_RETRY_BACKOFF_S):
            return False
        return self.category in TRANSIENT_CATEGORIES

    def diagnostics(self) -> dict[str, Any]:
        e = self.endpoint
        return {
            "provider": e.provider,
            "scheme": e.scheme,
            "host": e.host,
            "port": e.port,
            "path": e.path,
            "status": self.status,
            "category": self.category,
        }


@dataclass
class Reply:
    status: int
    body: bytes
    retry_after_s: float | None = None  # a 429 / 503's Retry-After, in seconds from now


class Requester(Protocol):
    def __call__(
        self,
        url: str,
        *,
        method: str,
        headers: Mapping[str, str],
        content: bytes | None,
        timeout_s: float,
        max_bytes: int,
    ) -> Awaitable[Reply]:
        """Send one request to a configured endpoint. Raise an exception with a ``category``."""


class Provider(Protocol):
    name: str
    endpoint: Endpoint

    async def search(self, query: str, count: int, request: Requester) -> list[Hit]: ...


def status_category(status: int) -> str | None:
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "server"
    return "bad_request"


async def call(
    endpoint: Endpoint,
    request: Requester,
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str],
    content: bytes | None = None,
    timeout_s: float,
    max_bytes: int,
) -> Any:
    """One request and its JSON answer, every failure turned into a redacted SearchFailure."""
    try:
        reply = await request(
            url, method=method, headers=headers, content=content, timeout_s=timeout_s, max_bytes=max_bytes
        )
    except SearchFailure:
        raise
    except Exception as e:  # the exception's text is never used: it may quote the URL
        category = getattr(e, "category", None) or "connect"
        category = {"address_refused": "connect", "url_refused": "config", "too_large": "too_large"}.get(
            category, category
        )
        failure = SearchFailure(endpoint, category)
        _log(failure)
        raise failure from None
    category = status_category(reply.status)
    if category is not None:
        wait = reply.retry_after_s if reply.status in (429, 503) else None
        failure = SearchFailure(endpoint, category, reply.status, retry_after_s=wait)
        _log(failure)
        raise failure
    try:
        return json.loads(reply.body)
    except (ValueError, UnicodeDecodeError):
        failure = SearchFailure(endpoint, "bad_response", reply.status, "The answer was not JSON.")
        _log(failure)
        raise failure from None
    except RecursionError:
        # "[[[[...]]]]" nested past the interpreter's recursion limit: not an answer to read (it
        # crashed the whole batch, every other query's results included).
        failure = SearchFailure(endpoint, "bad_response", reply.status, "The answer's JSON is nested too deeply.")
        _log(failure)
        raise failure from None


def _log(failure: SearchFailure) -> None:
    d = failure.diagnostics()
    log.warning(
        "web_search provider %s (%s://%s%s) failed: %s, status %s",
        d["provider"],
        d["scheme"],
        d["host"],
        d["path"],
        d["category"],
        d["status"],
        extra={"web_search": d},
    )


def text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


_TAGS = re.compile(r"<[^>]+>")


def plain(value: Any) -> str:
    """A provider's highlighted text as plain text: tags (<strong>) removed, entities (&#x27;) decoded."""
    return html.unescape(_TAGS.sub("", text(value))).strip()

"""Zuno's own retry policy for provider requests (the SDKs' retries are off: max_retries=0).

A transient failure — 429, 408, 5xx, 529 overloaded, a connection reset or timeout — is tried
again after an exponential backoff with jitter, or after exactly what ``Retry-After`` (seconds,
an HTTP-date, or ``retry-after-ms``) asks, capped. Anything else fails for good at once. Each
attempt is timed on its own and appended to ``RequestOutcome.attempts``.
"""

from __future__ import annotations

import email.utils
import html
import random
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zuno import limits

# How many wire attempts one request gets (the first one included) unless its provider's
# options.maxRetries says otherwise.
MAX_ATTEMPTS = limits.PROVIDER_MAX_RETRIES_DEFAULT + 1
# Backoff before retry n (n = 1, 2, ...): BASE * 2**(n-1), at most MAX, times a jitter in [0.5, 1].
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 8.0
# A Retry-After longer than this is waited only this long before the next attempt.
RETRY_AFTER_CAP_S = 60.0
# How much of a server's error message an error may quote (after the secrets are redacted).
MESSAGE_QUOTE_CHARS = 300

TRANSIENT_CATEGORIES = frozenset({"rate_limited", "overloaded", "server", "connection", "timeout"})
# Refusals of a request as too long (tokens) or too large (bytes, HTTP 413): a retry never helps, a
# compaction may (the loop compacts harder and sends it again, once).
OVERFLOW_CATEGORIES = frozenset({"context_length", "too_large"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = MAX_ATTEMPTS
    backoff_base_s: float = BACKOFF_BASE_S
    backoff_max_s: float = BACKOFF_MAX_S
    retry_after_cap_s: float = RETRY_AFTER_CAP_S

    def delay(self, retry_number: int, retry_after_s: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1 = the second attempt)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.retry_after_cap_s)
        base = min(self.backoff_max_s, self.backoff_base_s * 2 ** (retry_number - 1))
        return base * (rng or random).uniform(0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, classified; ``detail`` is already redacted."""

    category: str
    status: int | None
    detail: str
    retry_after_s: float | None = None

    @property
    def transient(self) -> bool:
        return self.category in TRANSIENT_CATEGORIES


class StreamFailure(Exception):
    """Raised by an adapter for a failure it read in the stream itself (an ``error`` event)."""

    def __init__(self, category: str, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.category = category
        self.detail = detail
        self.status = status


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` as delta-seconds
    or an HTTP-date. None when absent or unreadable."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
        return seconds if seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _status_category(status: int, error_type: str | None) -> str:
    if error_type == "overloaded_error" or status == 529:
        return "overloaded"
    if error_type == "rate_limit_error" or status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500 or error_type == "api_error":
        return "server"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 413 or error_type == "request_too_large":
        return "too_large"
    if status in (400, 422):
        return "bad_request"
    return "client"


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """(type, message, code) from an OpenAI ``{"error": {...}}`` (or its inner object, as the
    openai SDK keeps it) or an Anthropic ``{"type": "error", "error": {...}}`` body."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):

            def text(k: str) -> str | None:
                v = inner.get(k)
                return v if isinstance(v, str) else None

            return text("type"), text("message"), text("code")
    if isinstance(body, str):
        return None, readable_page(body), None
    return None, None, None


_TAG = re.compile(r"<[^>]*>")
_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)


def readable_page(body: str) -> str:
    """An error body as a person reads it: an HTML page (a proxy's or a gateway's) becomes its
    title and visible text, whitespace collapsed; any other text is kept as it is."""
    head = body.lstrip()[:200].lower()
    if not (head.startswith("<!doctype html") or head.startswith("<html") or "<body" in head or "<head" in head):
        return body
    title = _TITLE.search(body)
    text = " ".join(html.unescape(_TAG.sub(" ", _HIDDEN.sub(" ", body))).split())
    shown = " ".join(html.unescape(title.group(1)).split()) if title else ""
    if shown and not text.startswith(shown):
        text = f"{shown}: {text}" if text else shown
    return f"(an HTML page) {text or shown}".rstrip()


# Failures that look transient by status but are not: an exhausted quota, and a request too
# long for the model (the loop may compact and try again; a plain retry never helps).
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length", "exceed_context_size_error"})
_CONTEXT_PHRASES = (
    "prompt is too long",
    "context length",
    "context window",
    "maximum context",
    "available context size",  # llama.cpp's server
)


def _refine(category: str, kind: str | None, msg: str | None, code: str | None) -> str:
    if code in _QUOTA_CODES or kind in _QUOTA_CODES:
        return "quota"
    if code in _CONTEXT_CODES or kind in _CONTEXT_CODES or (
        category == "bad_request" and msg is not None and any(p in msg.lower() for p in _CONTEXT_PHRASES)
    ):
        return "context_length"
    return category


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[redacted]")
    if len(text) > MESSAGE_QUOTE_CHARS:
        text = text[:MESSAGE_QUOTE_CHARS] + "…"
    return text


_SDKS = ("openai", "anthropic")


def _sdk_errors(name: str) -> tuple[type[BaseException], ...]:
    """The SDKs' exception classes called ``name``, from the SDKs that are imported: an exception
    of an SDK can only exist once that SDK was imported, so none is imported here (the anthropic
    SDK alone takes seconds to import, and a run uses one API)."""
    return tuple(getattr(sys.modules[m], name) for m in _SDKS if m in sys.modules)


def _http_errors(name: str) -> tuple[type[BaseException], ...]:
    module = sys.modules.get("httpx2")
    return (getattr(module, name),) if module is not None else ()


def classify(exc: BaseException, secrets: tuple[str, ...]) -> Failure | None:
    """The failure an SDK (or adapter) exception stands for; None for one that is not a
    provider failure (a bug: let it propagate)."""
    if isinstance(exc, StreamFailure):
        return Failure(exc.category, exc.status, redact(exc.detail, secrets))
    if isinstance(exc, _sdk_errors("APIStatusError")):
        status = int(exc.status_code)
        kind, msg, code = _error_fields(exc.body)
        headers = exc.response.headers if exc.response is not None else None
        category = _refine(_status_category(status, kind), kind, msg, code)
        # The server may say outright whether a retry can help.
        should = (headers.get("x-should-retry") or "").lower() if headers is not None else ""
        if should == "false" and category in TRANSIENT_CATEGORIES:
            category = "not_retryable"
        retry_after = parse_retry_after(headers) if category in TRANSIENT_CATEGORIES else None
        detail = f"HTTP {status}" + (f": {redact(msg, secrets)}" if msg else "")
        return Failure(category, status if status >= 400 else None, detail, retry_after)
    if isinstance(exc, _sdk_errors("APITimeoutError")):
        return Failure("timeout", None, "the request timed out")
    if isinstance(exc, _sdk_errors("APIConnectionError")):
        cause = exc.__cause__
        name = type(cause).__name__ if cause is not None else "connection error"
        return Failure("connection", None, f"connection failed ({name})")
    # The anthropic SDK lets the HTTP client's errors out of a stream unwrapped.
    if isinstance(exc, _http_errors("TimeoutException")):
        return Failure("timeout", None, f"the request timed out ({type(exc).__name__})")
    if isinstance(exc, _http_errors("TransportError")):
        return Failure("connection", None, f"connection failed ({type(exc).__name__})")
    if isinstance(exc, _sdk_errors("APIError")):
        kind, msg, _code = _error_fields(getattr(exc, "body", None))
        category = {"overloaded_error": "overloaded", "rate_limit_error": "rate_limited"}.get(kind or "", "server")
        return Failure(category, None, redact(msg or "the stream reported an error", secrets))
    return None

"""Typed failures of a fetch. Each names its category and whether it may pass (transient).

Transient (the runtime may retry a Safe call after a backoff): a temporary resolver failure
(EAI_AGAIN), a connection reset or refused by the target, a response broken off mid-way, and the
HTTP statuses 408, 429, 502, 503 and 504 (429 and 503 not when Retry-After asks for a longer wait
than the backoff). A timeout is not, in any phase: one deadline covers the whole call, and a retry
would start the whole wait again. Everything else is not: a refused URL or address, a
certificate failure, a proxy that fails (a configuration problem, and it never falls back to a
direct connection), a body over the cap, a content type refused, a redirect rule, other statuses.
"""

from __future__ import annotations


class FetchError(Exception):
    category = "fetch"
    transient = False

    def __init__(self, message: str, *, transient: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if transient is not None:
            self.transient = transient


class UrlRefused(FetchError):
    """The URL itself is refused: nothing was resolved or sent."""

    category = "url_refused"


class AddressRefused(FetchError):
    """Every address of a hop was resolved but one is not public: nothing was sent to it."""

    category = "address_refused"


class ResolveError(FetchError):
    category = "resolve"


class ConnectFailed(FetchError):
    category = "connect"


class ProxyFailed(FetchError):
    category = "proxy"


class TlsFailed(FetchError):
    category = "tls"


class FetchTimeout(FetchError):
    category = "timeout"
    transient = True  # a search provider's (web_search); webfetch raises it with transient=False


class RedirectRefused(FetchError):
    """A redirect loop, a sixth hop, or a Location that cannot be followed; names the chain."""

    category = "redirect"


class BodyTooLarge(FetchError):
    category = "too_large"


class ContentRefused(FetchError):
    category = "content_refused"


class HttpStatusError(FetchError):
    category = "http_status"

    def __init__(self, message: str, status: int, body: str = "", transient: bool | None = None) -> None:
        super().__init__(message, transient=status in (408, 429, 502, 503, 504) if transient is None else transient)
        self.status = status
        self.body = body


class ProtocolFailed(FetchError):
    category = "protocol"

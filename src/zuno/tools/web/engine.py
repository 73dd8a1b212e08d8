"""The fetch engine: one hop at a time, each validated from scratch, pinned, bounded.

A hop: parse (``urls.parse_target``, the one parser) → choose the route (``proxy_env``) →
resolve once (A and AAAA) → validate the whole answer (``resolver.validate_answer``) → a fresh
``httpcore.AsyncConnectionPool`` whose backend dials only that answer (``backend``) → a
request built from the parsed target's fields (Host and SNI are the hostname) → the body
streamed under the cap. A redirect (at most five) starts the next hop from its Location, with
Authorization, Cookie and Proxy-Authorization dropped once the chain leaves the first origin.
The whole call runs under one deadline; a timeout names the route, the phase and the elapsed
time.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpcore

from zuno import limits
from zuno.tools.web.addresses import IPNetwork, parse_networks
from zuno.tools.web.backend import PinnedBackend, Progress
from zuno.tools.web.content import UNDECLARED, ContentType, Inflater, error_excerpt, refusal_for, sniff
from zuno.tools.web.errors import (
    AddressRefused,
    ConnectFailed,
    ContentRefused,
    FetchError,
    FetchTimeout,
    HttpStatusError,
    ProtocolFailed,
    RedirectRefused,
    ResolveError,
    UrlRefused,
)
from zuno.tools.web.proxy_env import proxy_for
from zuno.tools.web.resolver import Resolver, SystemResolver, Validated, validate_answer
from zuno.tools.web.urls import (
    Target,
    check_characters,
    collapse_slashes,
    encode_location,
    parse_target,
    redact,
    space_in_authority,
)

USER_AGENT = "Zuno-webfetch/0.1"
ACCEPT = "text/markdown, text/html;q=0.9, text/plain;q=0.9, application/json;q=0.8, */*;q=0.5"
REDIRECTS = (301, 302, 303, 307, 308)
# A timeout is never retried: one deadline covers the whole call (the spec's per-call maximum is
# 120 s), and a retry would start the whole wait again. These phases time out before the server
# answered anything.
UNREACHED_PHASES = frozenset({"resolve", "connect", "proxy handshake", "TLS"})
CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")
# The largest response header block read (status line and headers): httpcore's bound on one
# incomplete h11 event (``AsyncHTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE``; a test holds them
# equal). A larger one is refused and not retried: the server sends it again.
MAX_RESPONSE_HEADER_BYTES = 100 * 1024
# Headers a caller may not set: the request's framing, its routing and its Host are Zuno's.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
    }
)


@dataclass
class Fetched:
    url: str
    final_url: str
    status: int
    reason: str
    content_type: ContentType
    body: bytes
    redirects: list[str] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    widened: list[dict[str, str]] = field(default_factory=list)
    elapsed: float = 0.0
    addresses: list[str] = field(default_factory=list)


@dataclass
class _Response:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None


# RFC 9110 5.6.2: a field name is a token.
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _control_in_value(value: str) -> str | None:
    """The first control character a field value may not carry (RFC 9110 5.5: none but HTAB)."""
    for ch in value:
        if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
            return ch
    return None


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (headers or {}).items():
        if not k or any(c not in _TOKEN_CHARS for c in k):
            # Checked here: h11 refused a name like "X(" only while sending, which read as the
            # server breaking the protocol (and was retried as if it might pass).
            raise ValueError(
                f"headers: {k!r} is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)"
            )
        if k.lower() in RESERVED_HEADERS:
            raise ValueError(f"headers: {k} is set by Zuno and cannot be given")
        bad = _control_in_value(v)
        if bad is not None:
            what = "a line break or NUL" if bad in "\r\n\0" else f"the control character U+{ord(bad):04X}"
            raise ValueError(f"headers: the value of {k} contains {what}")
        out[k] = v
    return out


def _tls_context() -> ssl.SSLContext:
    # The system trust store (SSL_CERT_FILE / SSL_CERT_DIR are honoured by OpenSSL).
    ctx = ssl.create_default_context()
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _detail(e: BaseException) -> str:
    """httpcore's own words ("Server disconnected without sending a response."), bounded."""
    text = " ".join(str(e).split())[:200]
    return f": {text}" if text else ""


def retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds from now: delay-seconds or an HTTP-date; None when absent or unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        # ASCII digits only: str.isdigit also accepts "²" or "١", which float() refuses (a 429 with
        # "Retry-After: ²" crashed the call with a ValueError).
        return float(value) if value.isascii() else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_error(target: Target, resp: _Response, ctype: ContentType) -> HttpStatusError:
    status = resp.status
    message = f"{target.url} answered HTTP {status} {resp.reason}".rstrip()
    transient: bool | None = None
    wait = retry_after_s(resp.header("retry-after")) if status in (429, 503) else None
    if wait is not None and wait > max(limits.SAFE_RETRY_BACKOFF_S):
        # The runtime's backoff is shorter than the wait the server asks for: a retry now would
        # only be refused again.
        transient = False
        message += (
            f"; it asks to wait {wait:.0f} s before trying again (Retry-After), so it was not retried. "
            "Fetch it again after that wait, or use another source."
        )
    body = error_excerpt(resp.body, ctype, target.url, limits.WEBFETCH_ERROR_BODY_CHARS)
    if body:
        message += f"\nThe response body:\n{body}"
    return HttpStatusError(message, status, body=body, transient=transient)


def _headers_too_large(target: Target) -> ProtocolFailed:
    return ProtocolFailed(
        f"{target.origin} sent response headers over {MAX_RESPONSE_HEADER_BYTES // 1024} KiB "
        "(the limit on a response's header block), so its answer was not read; it was not "
        "retried, since the server sends the same headers again (browsers and curl stop at about "
        "the same size). Fetch another URL for the content.",
        transient=False,
    )


async def _error_body(response: httpcore.Response, result: _Response) -> bytes:
    """The start of an HTTP error's body (an API's error JSON, a 404 page): bounded, best effort."""
    try:
        inflater = Inflater(result.header("content-encoding"), limits.WEBFETCH_ERROR_BODY_BYTES, "")
    except FetchError:
        return b""
    parts: list[bytes] = []
    try:
        # A body that stalls must not turn a plain 404 into a timeout: what came in time is shown.
        async with asyncio.timeout(limits.WEBFETCH_ERROR_BODY_WAIT_S):
            async for chunk in response.aiter_stream():
                parts.append(inflater.feed(chunk))
    except (FetchError, httpcore.RemoteProtocolError, httpcore.NetworkError, TimeoutError):
        pass
    return b"".join(parts)


SNIFF_BYTES = 8192


def _refuse_sniffed(head: bytes, result: _Response, target: Target) -> None:
    """A file signature (%PDF-, PNG, ZIP, ...) decides whatever type was declared (a PDF served as
    text/plain is still a PDF); NUL bytes only when the type said nothing or was not text."""
    ctype = ContentType.parse(result.header("content-type"))
    kind = sniff(head)
    binary_hint = kind == "application/octet-stream"
    if kind and (not binary_hint or ctype.mime in UNDECLARED or not ctype.is_text):
        why = refusal_for(kind, target.url)
        if why:
            raise ContentRefused(why)


class Fetcher:
    """Runtime-scoped: holds the TLS context and the resolver; every call is independent."""

    def __init__(
        self,
        resolver: Resolver | None = None,
        environ: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        proxy_ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.resolver: Resolver = resolver or SystemResolver()
        self._environ = environ
        self._ssl = ssl_context
        self._proxy_ssl = proxy_ssl_context

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = _tls_context()
        return self._ssl

    def proxy_ssl_context(self) -> ssl.SSLContext:
        # A separate context: httpcore sets ALPN on the origin's context.
        if self._proxy_ssl is None:
            self._proxy_ssl = _tls_context()
        return self._proxy_ssl

    async def aclose(self) -> None:
        return None

    async def fetch(
        self,
        url: str,
        *,
        timeout_s: float = limits.WEBFETCH_DEFAULT_TIMEOUT_MS / 1000,
        max_bytes: int = limits.WEBFETCH_DEFAULT_MAX_BYTES,
        allow_private: list[str] | None = None,
        headers: Mapping[str, str] | None = None,
        hop_check: Callable[[Target], str | None] | None = None,
    ) -> Fetched:
        """``hop_check`` sees every redirect target before it is resolved and returns why it
        must not be followed (a permission rule), or None."""
        first = parse_target(url)
        user_headers = check_headers(headers)
        nets, hosts = parse_networks(allow_private or [])
        progress = Progress()
        chain: list[str] = [first.url]
        routes: list[str] = []
        widened: list[dict[str, str]] = []
        addresses: list[str] = []
        target = first
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    if not target.same_origin(first):
                        user_headers = {k: v for k, v in user_headers.items() if k.lower() not in CREDENTIAL_HEADERS}
                    try:
                        resp, validated = await self._hop(
                            target, user_headers, progress, max_bytes, nets=nets, hosts=hosts, policy=True
                        )
                    except AddressRefused as e:
                        if len(chain) == 1:
                            raise
                        raise RedirectRefused(
                            f"the redirect chain {' -> '.join(chain)} is refused at its last hop: {e.message}"
                        ) from None
                    routes.append(progress.route)
                    addresses.extend(str(a) for a in validated.addresses if str(a) not in addresses)
                    for a, by in validated.widened:
                        w = {"host": target.host, "address": a, "allowedBy": by}
                        if w not in widened:
                            widened.append(w)
                    if resp.status in REDIRECTS and resp.header("location") is not None:
                        target = self._next_hop(target, resp.header("location") or "", chain)
                        why = hop_check(target) if hop_check is not None else None
                        if why:
                            raise RedirectRefused(f"the redirect chain {' -> '.join(chain)} is refused: {why}")
                        continue
                    ctype = ContentType.parse(resp.header("content-type"))
                    if resp.status >= 400:
                        raise _status_error(target, resp, ctype)
                    return Fetched(
                        url=first.url,
                        final_url=target.url,
                        status=resp.status,
                        reason=resp.reason,
                        content_type=ctype,
                        body=resp.body,
                        redirects=chain[1:],
                        routes=routes,
                        widened=widened,
                        elapsed=progress.elapsed(),
                        addresses=addresses,
                    )
        except TimeoutError:
            advice = (
                "the server was never reached: check the host, the port and the proxy settings"
                if progress.phase in UNREACHED_PHASES
                else f"the server is slow: a larger timeout_ms (at most {limits.WEBFETCH_MAX_TIMEOUT_MS}) may help"
            )
            raise FetchTimeout(
                f"fetching {chain[-1]} timed out after {progress.elapsed():.2f} s (limit {timeout_s:g} s) "
                f"in the {progress.phase} phase, route {progress.route}. It was not retried (the call's whole "
                f"timeout was spent); {advice}.",
                transient=False,
            ) from None

    def _next_hop(self, current: Target, location: str, chain: list[str]) -> Target:
        shown = " -> ".join(chain)
        if len(chain) > limits.WEBFETCH_MAX_REDIRECTS:
            raise RedirectRefused(
                f"more than {limits.WEBFETCH_MAX_REDIRECTS} redirects: {shown} -> {location}. "
                "Fetch the final URL directly if it is the one you want."
            )
        try:
            # A server sends a non-ASCII Location as raw UTF-8 (browsers and curl read it so); the
            # header arrived decoded as Latin-1.
            with contextlib.suppress(UnicodeError):
                location = location.encode("latin-1").decode("utf-8")
            # A raw space in the path, query or fragment is percent-encoded, as browsers do (WHATWG);
            # one in the host names no host. The result is parsed and checked like any URL.
            location = encode_location(collapse_slashes(location))
            if space_in_authority(location):
                raise UrlRefused(
                    "the Location's scheme or host contains a space, which names no host "
                    "(browsers refuse this redirect too)"
                )
            # urljoin silently drops tabs and line breaks; they are refused as in any URL.
            check_characters(location)
            nxt = parse_target(urljoin(current.url, location))
        except FetchError as e:
            raise RedirectRefused(
                f"the redirect chain {shown} -> {redact(location)!r} is refused: {e.message}"
            ) from None
        if nxt.url in chain:
            raise RedirectRefused(f"a redirect loop: {shown} -> {nxt.url}")
        chain.append(nxt.url)
        return nxt

    async def _hop(
        self,
        target: Target,
        user_headers: Mapping[str, str],
        progress: Progress,
        max_bytes: int,
        *,
        nets: list[IPNetwork],
        hosts: list[str],
        policy: bool,
        method: str = "GET",
        content: bytes | None = None,
        follow_body: bool = False,
    ) -> tuple[_Response, Validated]:
        progress.phase = "resolve"
        progress.route = "direct"
        proxy = proxy_for(target, self.environ)
        progress.route = str(proxy) if proxy is not None else "direct"
        if target.ip is not None:
            answer = [target.ip]
        else:
            try:
                answer = await self.resolver.resolve(target.host)
            except FetchError:
                raise
            except OSError as e:
                raise ResolveError(f"{target.host} did not resolve ({e})") from None
        validated = validate_answer(target.host, list(answer), nets, hosts, policy=policy)
        backend = PinnedBackend(
            target, validated, proxy, self.resolver, progress, self.proxy_ssl_context() if proxy else None
        )
        given = {k.lower() for k in user_headers}
        # A caller's User-Agent or Accept replaces Zuno's: both were sent, two User-Agent lines
        # (a field that takes one value) and Zuno's Accept beside a provider's "application/json".
        defaults = [(k, v) for k, v in (("User-Agent", USER_AGENT), ("Accept", ACCEPT)) if k.lower() not in given]
        request_headers = [
            ("Host", target.authority),
            *defaults,
            ("Accept-Encoding", "gzip, deflate"),
            *user_headers.items(),
        ]
        if content is not None:
            request_headers.append(("Content-Length", str(len(content))))
        request = httpcore.Request(
            method,
            httpcore.URL(
                scheme=target.scheme.encode("ascii"),
                host=target.host.encode("ascii"),
                port=target.port,
                target=target.path.encode("ascii"),
            ),
            headers=[(k.encode("latin-1"), v.encode("utf-8")) for k, v in request_headers],
            content=content,
            extensions={"sni_hostname": target.host},
        )
        progress.phase = "connect"
        pool = httpcore.AsyncConnectionPool(
            ssl_context=self.ssl_context(), network_backend=backend, max_connections=1, retries=0
        )
        async with pool:
            try:
                response = await pool.handle_async_request(request)
            except FetchError:
                raise
            except (httpcore.RemoteProtocolError, httpcore.LocalProtocolError) as e:
                if "Receive buffer too long" in str(e):
                    raise _headers_too_large(target) from None
                raise ProtocolFailed(
                    f"{target.origin} broke the HTTP protocol in the {progress.phase} phase "
                    f"({type(e).__name__}{_detail(e)})",
                    transient=True,
                ) from None
            except (httpcore.NetworkError, OSError) as e:
                raise ConnectFailed(
                    f"the connection to {target.origin} failed in the {progress.phase} phase "
                    f"({type(e).__name__}{_detail(e)})",
                    transient=True,
                ) from None
            progress.phase = "body"
            try:
                # h11 stops at about this size only when the block arrives in pieces: counted here too.
                if sum(len(k) + len(v) + 4 for k, v in response.headers) > MAX_RESPONSE_HEADER_BYTES:
                    raise _headers_too_large(target)
                resp_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers]
                reason = response.extensions.get("reason_phrase", b"").decode("latin-1", "replace")
                result = _Response(response.status, reason, resp_headers, b"")
                if response.status in REDIRECTS and result.header("location") is not None and not follow_body:
                    return result, validated
                if response.status < 400 and policy:
                    ctype = ContentType.parse(result.header("content-type"))
                    undeclared = ctype.mime in UNDECLARED
                    why = refusal_for(ctype.mime, target.url) if not ctype.is_text and not undeclared else None
                    if why:
                        raise ContentRefused(why)
                if response.status >= 400 and not follow_body:
                    result.body = await _error_body(response, result)
                    return result, validated
                inflater = Inflater(result.header("content-encoding"), max_bytes, target.url)
                declared = (result.header("content-length") or "").strip()
                if (
                    inflater.encoding in ("identity", "")
                    and declared.isascii()
                    and declared.isdigit()
                    and int(declared) > max_bytes
                ):
                    # Refused before a byte of it is read: the body says how long it is.
                    inflater.refuse_declared(int(declared))
                parts: list[bytes] = []
                # The first SNIFF_BYTES decoded bytes decide, however the server cut them into
                # chunks: a body dripped one byte at a time was sniffed on its first byte alone.
                head = bytearray() if policy else None
                try:
                    async for chunk in response.aiter_stream():
                        data = inflater.feed(chunk)
                        if data:
                            parts.append(data)
                            if head is not None:
                                head += data[: SNIFF_BYTES - len(head)]
                                if len(head) >= SNIFF_BYTES:
                                    _refuse_sniffed(bytes(head), result, target)
                                    head = None
                except (httpcore.RemoteProtocolError, httpcore.NetworkError) as e:
                    if "Receive buffer too long" in str(e):
                        # A chunk-size line (its extensions) or trailer block past h11's bound: the
                        # server sends the same again, so it is not retried.
                        raise ProtocolFailed(
                            f"the body from {target.origin} has a chunk header or trailer over "
                            f"{MAX_RESPONSE_HEADER_BYTES // 1024} KiB, so it was not read further (after "
                            f"{inflater.total} bytes); it was not retried, since the server sends the same again. "
                            "Fetch another URL for the content.",
                            transient=False,
                        ) from None
                    raise ProtocolFailed(
                        f"the body from {target.origin} broke off after {inflater.total} bytes "
                        f"({type(e).__name__}{_detail(e)})",
                        transient=True,
                    ) from None
                if head:
                    _refuse_sniffed(bytes(head), result, target)
                inflater.finish()
                result.body = b"".join(parts)
                return result, validated
            finally:
                await response.aclose()

    async def request_configured(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
        timeout_s: float,
        max_bytes: int,
    ) -> _Response:
        """A request to an endpoint the user configured (a search provider): the same parser,
        pinning and proxy routes, no address policy (a self-hosted SearXNG is often on
        loopback) and no redirects. Errors carry no URL: callers add what may be shown."""
        target = parse_target(url)
        progress = Progress()
        try:
            async with asyncio.timeout(timeout_s):
                resp, _ = await self._hop(
                    target,
                    dict(headers or {}),
                    progress,
                    max_bytes,
                    nets=[],
                    hosts=[],
                    policy=False,
                    method=method,
                    content=content,
                    follow_body=True,
                )
                return resp
        except TimeoutError:
            raise FetchTimeout(
                f"timed out after {progress.elapsed():.2f} s in the {progress.phase} phase, route {progress.route}"
            ) from None

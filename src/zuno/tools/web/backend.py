"""Zuno's network backend for httpcore: it dials only the validated addresses of one hop.

httpx's transport does not let a caller choose where a connection goes, so Zuno gives
``httpcore.AsyncConnectionPool`` this backend. ``connect_tcp`` is asked for the origin's host
(the pool's key, so two hostnames never share a connection) and dials the addresses of the
hop's one validated answer instead — there is no second lookup. Through a proxy it dials the
proxy and asks it for the validated IP, never the name: HTTP CONNECT (plain http too, so every
route is a tunnel), HTTPS (TLS to the proxy, then CONNECT), SOCKS4 (IPv4 only) and SOCKS5. TLS
to the origin then runs inside, with the original hostname as SNI and for certificate checks.
A proxy that fails fails the hop: nothing falls back to a direct connection.

``Progress`` follows the phase (resolve, connect, proxy handshake, TLS, headers, body) so a
timeout can name it, and the route (direct, or which proxy) without credentials.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
import select
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpcore
from anyio.streams.tls import TLSAttribute, TLSStream

from zuno.tools.web.addresses import IPAddress
from zuno.tools.web.errors import ConnectFailed, ProxyFailed, TlsFailed
from zuno.tools.web.proxy_env import Proxy
from zuno.tools.web.resolver import Resolver, Validated
from zuno.tools.web.urls import Target

_CONNECT_REPLY_MAX = 16 * 1024
# RFC 8305's recommended Connection Attempt Delay.
HAPPY_EYEBALLS_DELAY_S = 0.25


_CLOSING: set[asyncio.Task[None]] = set()


def _close_loser(task: asyncio.Task[anyio.abc.SocketStream]) -> None:
    if task.cancelled() or task.exception() is not None:
        return
    closing = asyncio.ensure_future(task.result().aclose())
    _CLOSING.add(closing)
    closing.add_done_callback(_CLOSING.discard)


def interleave(addresses: list[IPAddress]) -> list[IPAddress]:
    """Alternate the families, keeping each family's order and starting with the first's."""
    if not addresses:
        return []
    first = [a for a in addresses if a.version == addresses[0].version]
    other = [a for a in addresses if a.version != addresses[0].version]
    out: list[IPAddress] = []
    for i in range(max(len(first), len(other))):
        out.extend(x[i] for x in (first, other) if i < len(x))
    return out


@dataclass
class Progress:
    started: float = field(default_factory=time.monotonic)
    phase: str = "resolve"
    route: str = "direct"
    dialled: list[str] = field(default_factory=list)  # every address a socket was opened to

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _credentials_refused(proxy: Proxy, how: str) -> str:
    """A proxy that wants credentials: none configured, or the configured ones refused."""
    host = f"[{proxy.host}]" if ":" in proxy.host else proxy.host
    if proxy.username is None:
        return (
            f"{proxy} asks for credentials {how} and {proxy.source or 'its setting'} carries none; not falling back "
            f"to a direct connection. Write them into {proxy.source or 'the proxy URL'} as "
            f"{proxy.scheme}://USER:PASSWORD@{host}:{proxy.port} (percent-encode special characters)."
        )
    return (
        f"{proxy} refused the credentials in {proxy.source or 'the proxy URL'} {how}; not falling back to a direct "
        "connection. Correct the user and password there (percent-encoded)."
    )


def _os_error_text(e: OSError) -> str:
    """The cause, as "Connection refused" (not asyncio's "Connect call failed ('127.0.0.1', 80)")."""
    if e.errno:
        return os.strerror(e.errno)
    return e.strerror or type(e).__name__


def _stream_error_text(e: BaseException) -> str:
    """Why a read or write failed: "Connection reset by peer", not anyio's wrapper's name."""
    cause = e if isinstance(e, OSError) else e.__cause__
    if isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError):
        return _os_error_text(cause)
    return type(e).__name__


def _ip_text(ip: IPAddress) -> str:
    return f"[{ip}]" if ip.version == 6 else str(ip)


def _readable(sock: socket.socket | None) -> bool:
    if sock is None or sock.fileno() < 0:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


class Stream(httpcore.AsyncNetworkStream):
    def __init__(self, stream: anyio.abc.ByteStream, progress: Progress, hostname: str) -> None:
        self._s = stream
        self._progress = progress
        self._hostname = hostname

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        try:
            return await self._s.receive(max_bytes)
        except anyio.EndOfStream:
            return b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, ssl.SSLError) as e:
            raise httpcore.ReadError(_stream_error_text(e)) from e

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        try:
            await self._s.send(buffer)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, ssl.SSLError) as e:
            raise httpcore.WriteError(_stream_error_text(e)) from e

    async def aclose(self) -> None:
        await self._s.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        self._progress.phase = "TLS"
        # The SNI and the certificate check use the hop's hostname, whatever httpcore passes.
        hostname = self._hostname
        try:
            tls = await TLSStream.wrap(self._s, hostname=hostname, ssl_context=ssl_context, standard_compatible=False)
        except ssl.SSLCertVerificationError as e:
            await self._s.aclose()
            raise TlsFailed(
                f"the certificate of {hostname} did not verify: {e.verify_message}. Verification is never "
                "skipped: for a server with a private CA, point SSL_CERT_FILE (or SSL_CERT_DIR) at a bundle "
                "that holds it; check the URL's host name and the machine's clock otherwise."
            ) from e
        except (ssl.SSLError, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as e:
            await self._s.aclose()
            why = getattr(e, "reason", None) or type(e).__name__
            plain = why in ("WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "HTTP_REQUEST", "RECORD_LAYER_FAILURE")
            hint = " The server answered in plain HTTP: use an http:// URL for it." if plain else ""
            raise TlsFailed(f"the TLS handshake with {hostname} failed ({why}).{hint}") from e
        self._progress.phase = "headers"
        return Stream(tls, self._progress, hostname)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._s.extra(TLSAttribute.ssl_object, None)
        if info == "is_readable":
            return _readable(self._s.extra(anyio.abc.SocketAttribute.raw_socket, None))
        if info == "server_addr":
            return self._s.extra(anyio.abc.SocketAttribute.remote_address, None)
        if info == "client_addr":
            return self._s.extra(anyio.abc.SocketAttribute.local_address, None)
        if info == "socket":
            return self._s.extra(anyio.abc.SocketAttribute.raw_socket, None)
        return None


async def _receive_exactly(stream: anyio.abc.ByteStream, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = await stream.receive(n - len(data))
        except anyio.EndOfStream:
            raise ProxyFailed("the proxy closed the connection during the handshake") from None
        data += chunk
    return bytes(data)


@dataclass
class PinnedBackend(httpcore.AsyncNetworkBackend):
    """The backend of one hop."""

    target: Target
    validated: Validated
    proxy: Proxy | None
    resolver: Resolver
    progress: Progress
    proxy_ssl: ssl.SSLContext | None = None

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        if host != self.target.host or port != self.target.port:
            # The pool only ever asks for this hop's origin; anything else is never dialled.
            raise ConnectFailed(f"refusing to dial {host}:{port}, which is not this hop's validated origin")
        if self.proxy is None:
            raw = await self._direct()
        else:
            raw = await self._through_proxy(self.proxy)
        if self.target.scheme == "http":
            self.progress.phase = "headers"
        return Stream(raw, self.progress, self.target.host)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    async def _dial(self, ip: IPAddress, port: int) -> anyio.abc.SocketStream:
        self.progress.dialled.append(str(ip))
        try:
            return await anyio.connect_tcp(str(ip), port)
        except OSError as e:
            # anyio wraps the one attempt's error in "All connection attempts failed": the
            # cause says what happened (refused, unreachable, ...), and decides whether it passes.
            if isinstance(e.__cause__, OSError):
                raise e.__cause__ from None
            raise

    async def _direct(self) -> anyio.abc.ByteStream:
        """Happy eyeballs over the validated answer (RFC 8305): families interleaved, a new
        attempt every 250 ms or as soon as the previous one fails, the first to connect wins."""
        self.progress.phase = "connect"
        order = interleave(list(self.validated.addresses))
        port = self.target.port
        errors: list[str] = []
        refused_or_reset = False
        pending: dict[asyncio.Task[anyio.abc.SocketStream], IPAddress] = {}
        winner: anyio.abc.SocketStream | None = None
        nxt = 0
        try:
            while winner is None:
                if nxt < len(order):
                    pending[asyncio.ensure_future(self._dial(order[nxt], port))] = order[nxt]
                    nxt += 1
                if not pending:
                    break
                done, _ = await asyncio.wait(
                    pending,
                    timeout=HAPPY_EYEBALLS_DELAY_S if nxt < len(order) else None,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for task in done:
                    ip = pending.pop(task)
                    exc = task.exception()
                    if exc is None:
                        if winner is None:
                            winner = task.result()
                        else:
                            await task.result().aclose()
                    elif isinstance(exc, OSError):
                        refused_or_reset = refused_or_reset or isinstance(
                            exc, ConnectionRefusedError | ConnectionResetError
                        )
                        errors.append(f"{_ip_text(ip)}:{port}: {_os_error_text(exc)}")
                    else:
                        raise exc
        finally:
            for task in pending:
                # Never awaited here (that could swallow this task's own cancellation): a loser
                # that connected after all is closed from its done callback.
                task.add_done_callback(_close_loser)
                task.cancel()
        if winner is not None:
            return winner
        raise ConnectFailed(
            f"could not connect to {self.target.host} ({'; '.join(errors)})", transient=refused_or_reset
        )

    async def _proxy_addresses(self, proxy: Proxy) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(proxy.host)]
        except ValueError:
            pass
        try:
            return await self.resolver.resolve(proxy.host)
        except Exception as e:
            raise ProxyFailed(f"{proxy} did not resolve; not falling back to a direct connection") from e

    async def _through_proxy(self, proxy: Proxy) -> anyio.abc.ByteStream:
        self.progress.phase = "connect"
        candidates = list(self.validated.addresses)
        if proxy.kind == "socks4":
            candidates = [ip for ip in candidates if ip.version == 4]
            if not candidates:
                raise ProxyFailed(
                    f"{proxy} cannot carry an IPv6 target and {self.target.host} has no IPv4 address; "
                    "not falling back to a direct connection"
                )
        proxy_ips = await self._proxy_addresses(proxy)
        last: str = ""
        for ip in candidates:
            stream: anyio.abc.ByteStream | None = None
            self.progress.phase = "connect"
            for pip in proxy_ips:
                try:
                    stream = await self._dial(pip, proxy.port)
                    break
                except OSError as e:
                    last = _os_error_text(e)
            if stream is None:
                raise ProxyFailed(
                    f"could not connect to {proxy} ({last}); not falling back to a direct connection. "
                    f"Start that proxy, or correct or unset {proxy.source}."
                )
            self.progress.phase = "proxy handshake"
            try:
                if proxy.kind == "https":
                    stream = await self._proxy_tls(stream, proxy)
                if proxy.kind in ("http", "https"):
                    await self._connect_method(stream, proxy, ip)
                elif proxy.kind == "socks4":
                    await self._socks4(stream, proxy, ip)
                else:
                    await self._socks5(stream, proxy, ip)
                return stream
            except _TargetUnreachable as e:
                last = str(e)
                await stream.aclose()
                continue
            except (anyio.BrokenResourceError, anyio.EndOfStream, OSError) as e:
                await stream.aclose()
                raise ProxyFailed(
                    f"{proxy} broke the handshake ({type(e).__name__}); not falling back to a direct connection"
                ) from e
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                raise
        raise ProxyFailed(f"{proxy} could not reach {self.target.host}: {last}; not falling back to direct")

    async def _proxy_tls(self, stream: anyio.abc.ByteStream, proxy: Proxy) -> anyio.abc.ByteStream:
        ctx = self.proxy_ssl or ssl.create_default_context()
        try:
            return await TLSStream.wrap(stream, hostname=proxy.host, ssl_context=ctx, standard_compatible=False)
        except ssl.SSLError as e:
            await stream.aclose()
            raise ProxyFailed(f"the TLS handshake with {proxy} failed: {type(e).__name__}") from e

    async def _connect_method(self, stream: anyio.abc.ByteStream, proxy: Proxy, ip: IPAddress) -> None:
        where = f"{_ip_text(ip)}:{self.target.port}"
        lines = [f"CONNECT {where} HTTP/1.1", f"Host: {where}"]
        if proxy.username is not None:
            token = base64.b64encode(f"{proxy.username}:{proxy.password or ''}".encode()).decode("ascii")
            lines.append(f"Proxy-Authorization: Basic {token}")
        await stream.send(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
        head = bytearray()
        while b"\r\n\r\n" not in head:
            if len(head) >= _CONNECT_REPLY_MAX:  # a reply of exactly the limit is read whole
                raise ProxyFailed(f"{proxy} sent an oversized CONNECT reply")
            try:
                # One byte at a time: nothing after the reply's blank line may be consumed.
                head += await stream.receive(1)
            except anyio.EndOfStream:
                raise ProxyFailed(f"{proxy} closed the connection before answering CONNECT") from None
        status_line = bytes(head).split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ProxyFailed(f"{proxy} sent a malformed CONNECT reply")
        status = int(parts[1])
        if status == 407:
            raise ProxyFailed(_credentials_refused(proxy, "(HTTP 407)"))
        if status in (502, 503, 504):
            raise _TargetUnreachable(f"CONNECT answered {status}")
        if not 200 <= status < 300:
            raise ProxyFailed(f"{proxy} refused CONNECT with status {status}; not falling back to direct")

    async def _socks4(self, stream: anyio.abc.ByteStream, proxy: Proxy, ip: IPAddress) -> None:
        user = (proxy.username or "").encode("utf-8")
        await stream.send(struct.pack(">BBH", 4, 1, self.target.port) + ip.packed + user + b"\x00")
        reply = await _receive_exactly(stream, 8)
        if reply[0] != 0:
            raise ProxyFailed(f"{proxy} sent a malformed SOCKS4 reply")
        if reply[1] != 0x5A:
            if reply[1] == 0x5B:
                raise _TargetUnreachable(f"SOCKS4 request rejected (code {reply[1]:#x})")
            raise ProxyFailed(f"{proxy} refused the SOCKS4 request (code {reply[1]:#x})")

    async def _socks5(self, stream: anyio.abc.ByteStream, proxy: Proxy, ip: IPAddress) -> None:
        methods = b"\x00\x02" if proxy.username is not None else b"\x00"
        await stream.send(bytes([5, len(methods)]) + methods)
        choice = await _receive_exactly(stream, 2)
        if choice[0] != 5:
            raise ProxyFailed(f"{proxy} is not a SOCKS5 proxy")
        if choice[1] == 0x02:
            if proxy.username is None:
                raise ProxyFailed(_credentials_refused(proxy, "(SOCKS5 user/password)"))
            u = proxy.username.encode("utf-8")
            p = (proxy.password or "").encode("utf-8")
            if len(u) > 255 or len(p) > 255:
                raise ProxyFailed(f"{proxy}: SOCKS5 credentials are limited to 255 bytes each")
            await stream.send(bytes([1, len(u)]) + u + bytes([len(p)]) + p)
            auth = await _receive_exactly(stream, 2)
            if auth[1] != 0:
                raise ProxyFailed(_credentials_refused(proxy, "(SOCKS5 user/password)"))
        elif choice[1] != 0x00:
            raise ProxyFailed(
                _credentials_refused(proxy, "(SOCKS5: no method without them)")
                if proxy.username is None
                else f"{proxy} accepts none of the offered authentication methods (none, user/password); "
                "not falling back to a direct connection"
            )
        atyp = 1 if ip.version == 4 else 4
        await stream.send(bytes([5, 1, 0, atyp]) + ip.packed + struct.pack(">H", self.target.port))
        head = await _receive_exactly(stream, 4)
        if head[0] != 5:
            raise ProxyFailed(f"{proxy} sent a malformed SOCKS5 reply")
        rep, bound_type = head[1], head[3]
        if rep != 0:
            if rep in (3, 4, 5, 6):
                raise _TargetUnreachable(f"SOCKS5 reply {rep}")
            raise ProxyFailed(f"{proxy} refused the SOCKS5 request (reply {rep})")
        if bound_type == 1:
            await _receive_exactly(stream, 4 + 2)
        elif bound_type == 4:
            await _receive_exactly(stream, 16 + 2)
        elif bound_type == 3:
            n = (await _receive_exactly(stream, 1))[0]
            await _receive_exactly(stream, n + 2)


class _TargetUnreachable(Exception):
    """The proxy works but could not reach this address: the next validated address is tried."""

"""Loopback peers for the web tests: an HTTP(S) origin that records Host and SNI, HTTP CONNECT /
HTTPS / SOCKS4 / SOCKS5 proxies that record the target they were asked for, and a table resolver.

Everything listens on 127.0.0.1 (or ::1) only. TLS certificates come from trustme.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trustme

from zuno.tools.web.errors import ResolveError

HOSTS = ["a.test", "b.test", "proxy.test", "localhost", "127.0.0.1", "::1"]


class CA:
    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.cert = self.ca.issue_cert(*HOSTS)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.cert.configure_cert(ctx)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self.ca.configure_trust(ctx)
        return ctx


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    sni: str | None
    peer: str

    def header(self, name: str) -> str | None:
        for k, v in self.headers.items():
            if k.lower() == name.lower():
                return v
        return None


Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[bytes | None]]


def response(status: int = 200, body: bytes = b"", ctype: str = "text/plain; charset=utf-8", **extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Type: {ctype}", f"Content-Length: {len(body)}"]
    head += [f"{k.replace('_', '-')}: {v}" for k, v in extra.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class Origin:
    """An HTTP/1.1 origin on loopback. ``routes`` maps a path (without query) to bytes or a handler."""

    def __init__(self, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.tls = tls
        self.bind = host
        self.routes: dict[str, bytes | Handler] = {}
        self.requests: list[Request] = []
        self.connections = 0
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._sni: dict[int, str | None] = {}

    async def __aenter__(self) -> Origin:
        ctx = self.tls
        if ctx is not None:

            def on_sni(sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
                sslobj.sni = name  # type: ignore[attr-defined]

            ctx.sni_callback = on_sni  # type: ignore[assignment]
        self._server = await asyncio.start_server(self._serve, self.bind, 0, ssl=ctx)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        sslobj = writer.get_extra_info("ssl_object")
        sni = getattr(sslobj, "sni", None) if sslobj is not None else None
        peer = str(writer.get_extra_info("peername"))
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if line:
                        k, _, v = line.partition(":")
                        headers[k.strip()] = v.strip()
                n = int(headers.get("Content-Length", "0") or 0)
                if n:
                    await reader.readexactly(n)
                req = Request(method, target, headers, sni, peer)
                self.requests.append(req)
                route = self.routes.get(target.split("?", 1)[0])
                if route is None:
                    out: bytes | None = response(404, b"not found")
                elif isinstance(route, bytes):
                    out = route
                else:
                    out = await route(req, writer)
                if out is None:
                    return
                writer.write(out)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def url(self, host: str = "127.0.0.1", path: str = "/") -> str:
        scheme = "https" if self.tls else "http"
        h = f"[{host}]" if ":" in host else host
        return f"{scheme}://{h}:{self.port}{path}"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@dataclass
class ProxyServer:
    """kind: "http" (CONNECT), "https" (TLS, then CONNECT), "socks4" or "socks5".

    ``targets`` records what each client asked for: (host text, port). ``auth`` records the
    credentials the client offered (Proxy-Authorization value, SOCKS4 user id, SOCKS5 user:pass).
    ``silent`` accepts and never answers (a stuck handshake)."""

    kind: str
    tls: ssl.SSLContext | None = None
    silent: bool = False
    targets: list[tuple[str, int]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    port: int = 0
    _server: Any = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def __aenter__(self) -> ProxyServer:
        ssl_ctx = self.tls if self.kind == "https" else None
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl_ctx)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def url(self, host: str = "127.0.0.1", userinfo: str = "") -> str:
        return f"{self.kind}://{userinfo}{host}:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.silent:
            await asyncio.sleep(3600)
            return
        try:
            if self.kind in ("http", "https"):
                target = await self._connect(reader, writer)
            elif self.kind == "socks4":
                target = await self._socks4(reader, writer)
            else:
                target = await self._socks5(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        if target is None:
            writer.close()
            return
        host, port = target
        try:
            up_r, up_w = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await self._ok(writer)
        t1 = asyncio.ensure_future(_pipe(reader, up_w))
        t2 = asyncio.ensure_future(_pipe(up_r, writer))
        self._tasks.update((t1, t2))
        await asyncio.gather(t1, t2, return_exceptions=True)

    async def _ok(self, writer: asyncio.StreamWriter) -> None:
        if self.kind in ("http", "https"):
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        elif self.kind == "socks4":
            writer.write(b"\x00\x5a" + b"\x00" * 6)
        else:
            writer.write(b"\x05\x00\x00\x01" + b"\x00" * 6)
        await writer.drain()

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, where, _ = head[0].split(" ", 2)
        for line in head[1:]:
            if line.lower().startswith("proxy-authorization:"):
                self.auth.append(line.split(":", 1)[1].strip())
        self.targets.append((where.rsplit(":", 1)[0], int(where.rsplit(":", 1)[1])))
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 No\r\n\r\n")
            return None
        host = where.rsplit(":", 1)[0].strip("[]")
        return host, int(where.rsplit(":", 1)[1])

    async def _socks4(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        _vn, _cd, port = struct.unpack(">BBH", await reader.readexactly(4))
        ip = ipaddress.IPv4Address(await reader.readexactly(4))
        user = await reader.readuntil(b"\x00")
        self.auth.append(user[:-1].decode())
        host = str(ip)
        if int(ip) < 256:  # SOCKS4a: a hostname follows
            host = (await reader.readuntil(b"\x00"))[:-1].decode()
        self.targets.append((host, port))
        return host, port

    async def _socks5(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        _ver, n = await reader.readexactly(2)
        methods = await reader.readexactly(n)
        if 2 in methods:
            writer.write(b"\x05\x02")
            await writer.drain()
            _, ulen = await reader.readexactly(2)
            user = await reader.readexactly(ulen)
            (plen,) = await reader.readexactly(1)
            pw = await reader.readexactly(plen)
            self.auth.append(f"{user.decode()}:{pw.decode()}")
            writer.write(b"\x01\x00")
        else:
            writer.write(b"\x05\x00")
        await writer.drain()
        _, _cmd, _, atyp = await reader.readexactly(4)
        if atyp == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif atyp == 4:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        else:
            (ln,) = await reader.readexactly(1)
            host = (await reader.readexactly(ln)).decode()
        (port,) = struct.unpack(">H", await reader.readexactly(2))
        self.targets.append((host, port))
        return host, port


class TableResolver:
    """Answers from a table; records every lookup. A list of answers is served one per call."""

    def __init__(self, table: dict[str, list[str] | list[list[str]]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(self, host: str) -> list[Any]:
        self.calls.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise ResolveError(f"{host} did not resolve (not in the test table)")
        if answer and isinstance(answer[0], list):
            seq = answer  # a rebinding answer: one per call
            idx = min(self.calls.count(host) - 1, len(seq) - 1)
            return [ipaddress.ip_address(a) for a in seq[idx]]  # type: ignore[arg-type]
        return [ipaddress.ip_address(a) for a in answer]  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

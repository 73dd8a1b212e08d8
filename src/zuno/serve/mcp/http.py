"""``zuno mcp --http HOST:PORT``: streamable HTTP at ``/mcp``.

Loopback by default (another address needs ``--allow-remote``), a bearer token on every request
(generated when not given and printed once to stderr), DNS-rebinding protection on (Host and
Origin must name this server). One Zuno session per client identity: the token a client presents
and, on a legacy (handshake) connection, its ``Mcp-Session-Id``. A 2026-07-28 request has no
connection, so its identity is its token alone: give each such client its own ``--token``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import secrets
import socket
import sys
from collections import deque
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from zuno.cli_support import UsageError
from zuno.serve.mcp.server import Frontend, build_server
from zuno.serve.mcp.wire_check import MAX_MESSAGE_BYTES, reject

MCP_PATH = "/mcp"
IDENTITY_KEY = "zuno_client"
# On SIGTERM, requests still running after this long are cancelled (their calls settle and are recorded).
HTTP_SHUTDOWN_GRACE_S = 5


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # zuno mcp owns SIGINT / SIGTERM: its handler asks this server to shut down gracefully.
        yield


def parse_bind(value: str, allow_remote: bool = False) -> tuple[str, int]:
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        raise UsageError(f"--http {value!r}: give HOST:PORT, for example 127.0.0.1:8765.")
    host = host.strip("[]")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise UsageError(f"--http {value!r}: the port must be 0..=65535.")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not allow_remote:
        raise UsageError(
            f"--http {value!r} is not a loopback address: zuno mcp serves 127.0.0.1 / ::1 by default. "
            "Pass --allow-remote to serve another address (the bearer token is still required)."
        )
    return host, port


def token_identity(token: str) -> str:
    return "tok_" + hashlib.sha256(token.encode()).hexdigest()[:16]


class BearerGate:
    """ASGI middleware: every request carries ``Authorization: Bearer <one of the tokens>``, or it
    is answered 401 before anything reads it. The matching token names the client."""

    def __init__(self, app: ASGIApp, tokens: list[str]) -> None:
        self.app = app
        self._tokens = [t.encode() for t in tokens]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = b""
        for k, v in scope.get("headers", []):
            if k.lower() == b"authorization":
                header = v
        presented = header[7:].strip() if header[:7].lower() == b"bearer " else b""
        match = next((t for t in self._tokens if presented and hmac.compare_digest(presented, t)), None)
        if match is None:
            body = b'{"error":"unauthorized","error_description":"send Authorization: Bearer <token>"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        identity = token_identity(match.decode())
        scope.setdefault("state", {})[IDENTITY_KEY] = identity
        # The SDK serves a legacy session only to the principal that opened it (as if unknown to
        # any other: 404), when it is told who that is: without this, a client holding another
        # token could use, or DELETE, a session it did not open.
        scope["user"] = AuthenticatedUser(AccessToken(token=identity, client_id=identity, scopes=[]))
        await self.app(scope, receive, send)


class WireCheck:
    """ASGI middleware: a POST body that is not one valid JSON-RPC message is answered 400 with its
    JSON-RPC error (``wire_check.reject``), as on stdio. Without it the SDK took a request whose
    ``id`` is null, a fraction or a boolean for a notification (202, never answered) and answered
    a batch with -32602. A request whose ``MCP-Protocol-Version`` header names no version this
    server speaks is answered 400 with -32022 naming the versions (any method). Anything else
    reaches the SDK unchanged, body and all."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        version = _protocol_header(scope)
        if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS:
            # The SDK took every unknown version for the 2026-07-28 wire and answered "params._meta
            # must be an object carrying ... envelope keys", which names neither the header nor the fix.
            shown = ", ".join(SUPPORTED_PROTOCOL_VERSIONS)
            error = {
                "code": types.UNSUPPORTED_PROTOCOL_VERSION,
                "message": f"Unsupported protocol version: the MCP-Protocol-Version header says {version!r}; "
                f"this server speaks {shown}",
                "data": {"supported": list(SUPPORTED_PROTOCOL_VERSIONS), "requested": version},
            }
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            await _send_json(send, 400, body)
            return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        held: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False) or size > MAX_MESSAGE_BYTES:
                break
        complete = held[-1]["type"] == "http.request" and not held[-1].get("more_body", False)
        if complete and size <= MAX_MESSAGE_BYTES:
            body = b"".join(m.get("body", b"") for m in held)
            try:
                error = reject(body.decode("utf-8"))
            except UnicodeDecodeError:
                error = None  # the SDK answers it (-32700)
            if error is not None:
                payload = error.model_dump_json(by_alias=True, exclude_unset=True).encode()
                await send(
                    {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": payload})
                return

        async def replay() -> Message:
            return held.popleft() if held else await receive()

        await self.app(scope, replay, send)


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _protocol_header(scope: Scope) -> str | None:
    for k, v in scope.get("headers", []):
        if k.lower() == b"mcp-protocol-version":
            return v.decode("latin-1").strip()
    return None


def identify(ctx: Any) -> str:
    request = getattr(ctx, "request", None)
    if request is None:
        return "anonymous"
    who = request.scope.get("state", {}).get(IDENTITY_KEY, "anonymous")
    session = request.headers.get("mcp-session-id")
    return f"{who}:{session}" if session else who


def security_for(host: str, port: int) -> TransportSecuritySettings:
    shown = f"[{host}]" if ":" in host else host
    names = {shown, "localhost", "127.0.0.1", "[::1]"} if host in ("127.0.0.1", "::1", "localhost") else {shown}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:{port}" for n in names] + [f"{n}:*" for n in names if port == 0],
        allowed_origins=[f"http://{n}:{port}" for n in names] + [f"http://{n}:*" for n in names if port == 0],
    )


def build_app(frontend: Frontend, host: str, port: int, tokens: list[str]) -> ASGIApp:
    frontend.identify = identify
    server = build_server(frontend)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security_for(host, port),
        host=host,
        # The SDK's default (4 MiB) would refuse a write stdio takes, with a bare 413: the same
        # ceiling as a stdio line, so what is too large is refused by admission, naming why.
        max_request_body_size=MAX_MESSAGE_BYTES,
    )
    _close_sessions_with_connections(server.session_manager, frontend)
    return BearerGate(WireCheck(app), tokens)


def _close_sessions_with_connections(manager: Any, frontend: Frontend) -> None:
    """The SDK forgets a legacy connection (the client's DELETE, its idle timeout, a crash) in one
    place, ``_discard_session``: the Zuno session of that connection is closed there too. Before,
    it stayed open until the server exited, its background jobs still running."""
    discard = manager._discard_session

    async def discard_and_close(session_id: str, transport: Any) -> None:
        try:
            await discard(session_id, transport)
        finally:
            frontend.connection_ended(f":{session_id}")

    manager._discard_session = discard_and_close


async def serve_http(frontend: Frontend, host: str, port: int, token: str | list[str] | None) -> None:
    # Bound first, before anything starts or "serving" is said: a port in use is a usage error
    # naming it (it was "serving http://...", then uvicorn's own error and exit status 3), and
    # port 0 names the port actually bound.
    sock = bind_socket(host, port)
    try:
        await _serve_on(frontend, sock, host, token)
    finally:
        sock.close()


async def _serve_on(frontend: Frontend, sock: socket.socket, host: str, token: str | list[str] | None) -> None:
    port = sock.getsockname()[1]
    # Connected MCP servers start now: a name collision is an error at start, not on a first request.
    await frontend.runtime.start_mcp()
    tokens = [token] if isinstance(token, str) else list(token or [])
    if not tokens:
        tokens = [secrets.token_urlsafe(32)]
        print(f"zuno mcp: bearer token (shown once): {tokens[0]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        build_app(frontend, host, port, tokens),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=HTTP_SHUTDOWN_GRACE_S,
    )
    server = _Uvicorn(config)
    frontend.stop = lambda: setattr(server, "should_exit", True)
    shown = f"[{host}]" if ":" in host else host
    print(f"zuno mcp: serving http://{shown}:{port}{MCP_PATH}", file=sys.stderr, flush=True)
    await server.serve(sockets=[sock])


HTTP_BACKLOG = 2048  # uvicorn's default backlog


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # Listening before "serving" is said: a client that connects as soon as it reads that line
        # waits in the backlog until uvicorn accepts, instead of being refused (uvicorn's own
        # listen() comes once its startup has run).
        sock.listen(HTTP_BACKLOG)
    except OSError as e:
        sock.close()
        raise UsageError(
            f"--http {host}:{port}: cannot listen there ({e.strerror or e}). "
            "Choose another port (0 picks a free one), or stop what is using it."
        ) from None
    return sock

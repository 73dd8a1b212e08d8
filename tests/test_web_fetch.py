"""The fetch engine against real loopback servers and proxies, with an injected resolver.

Loopback is reached through ``allow_private`` (the production path); every hostname is answered
by the table resolver, so Host and SNI can be checked as the server saw them.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
import zlib

import pytest

from zuno.tools.web.engine import Fetcher
from zuno.tools.web.errors import (
    AddressRefused,
    BodyTooLarge,
    ContentRefused,
    FetchTimeout,
    HttpStatusError,
    ProxyFailed,
    RedirectRefused,
)

from webhelp import CA, Origin, ProxyServer, Request, TableResolver, response

LOOP = ["127.0.0.0/8", "::1"]


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA()


def make(ca: CA, table: dict | None = None, env: dict | None = None) -> tuple[Fetcher, TableResolver]:
    r = TableResolver(table or {"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"], "proxy.test": ["127.0.0.1"]})
    f = Fetcher(resolver=r, environ=env or {}, ssl_context=ca.client_context(), proxy_ssl_context=ca.client_context())
    return f, r


ROUTES = ["direct", "http", "https", "socks4", "socks5", "socks5h", "socks4a"]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("route", ROUTES)
async def test_host_and_sni_on_every_route_and_the_proxy_is_asked_for_the_ip(ca: CA, scheme: str, route: str) -> None:
    async with Origin(ca.server_context() if scheme == "https" else None) as origin:
        origin.routes["/p"] = response(200, b"ok")
        kind = route.rstrip("ha") if route.startswith("socks") else route
        async with ProxyServer(kind if route != "direct" else "http", tls=ca.server_context()) as proxy:
            env = {}
            if route != "direct":
                host = "proxy.test" if route == "https" else "127.0.0.1"
                env = {f"{scheme}_proxy": f"{route}://{host}:{proxy.port}"}
            f, resolver = make(ca, env=env)
            got = await f.fetch(f"{scheme}://a.test:{origin.port}/p?x=1", allow_private=LOOP)
        assert got.status == 200 and got.body == b"ok"
        seen = origin.requests[-1]
        assert seen.header("host") == f"a.test:{origin.port}"
        assert seen.target == "/p?x=1"
        assert seen.sni == ("a.test" if scheme == "https" else None)
        assert seen.header("proxy-authorization") is None
        if route == "direct":
            assert proxy.targets == [] and got.routes == ["direct"]
        else:
            # The proxy was asked for the validated IP, never the name (CONNECT for plain http too).
            assert proxy.targets == [("127.0.0.1", origin.port)]
            assert got.routes[0].startswith(f"{route} proxy")
        assert resolver.calls.count("a.test") == 1


async def test_ipv6_through_connect_is_bracketed_and_socks4_refuses_ipv6(ca: CA) -> None:
    async with Origin(ca.server_context(), host="::1") as origin:
        origin.routes["/"] = response(200, b"six")
        table = {"a.test": ["::1"]}
        async with ProxyServer("http") as proxy:
            f, _ = make(ca, table, {"https_proxy": proxy.url()})
            got = await f.fetch(f"https://a.test:{origin.port}/", allow_private=LOOP)
            assert got.body == b"six"
            assert proxy.targets == [("[::1]", origin.port)]
        async with ProxyServer("socks5") as proxy:
            f, _ = make(ca, table, {"https_proxy": proxy.url()})
            assert (await f.fetch(f"https://a.test:{origin.port}/", allow_private=LOOP)).body == b"six"
            assert proxy.targets == [("::1", origin.port)]
        async with ProxyServer("socks4") as proxy:
            f, _ = make(ca, table, {"https_proxy": proxy.url()})
            with pytest.raises(ProxyFailed, match="cannot carry an IPv6 target"):
                await f.fetch(f"https://a.test:{origin.port}/", allow_private=LOOP)
            assert proxy.targets == []


async def test_proxy_credentials_go_to_the_proxy_only_and_never_into_errors(ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/"] = response(200, b"ok")
        for kind, expect in (("http", "Basic dXNlcjpodW50ZXIy"), ("socks5", "user:hunter2"), ("socks4", "user")):
            async with ProxyServer(kind) as proxy:
                f, _ = make(ca, env={"all_proxy": proxy.url(userinfo="user:hunter2@")})
                got = await f.fetch(f"https://a.test:{origin.port}/", allow_private=LOOP)
                assert proxy.auth == [expect]
                assert all("hunter2" not in r for r in got.routes)
        assert all(r.header("proxy-authorization") is None for r in origin.requests)
    f, _ = make(ca, env={"all_proxy": "http://user:hunter2@127.0.0.1:1"})
    with pytest.raises(ProxyFailed) as e:
        await f.fetch("https://a.test/", allow_private=LOOP)
    assert "hunter2" not in str(e.value) and "user" not in str(e.value)
    assert "not falling back to a direct connection" in str(e.value)


async def test_a_refused_answer_sends_nothing_and_allow_private_is_exact(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/"] = response(200, b"secret")
        f, _ = make(ca)
        with pytest.raises(AddressRefused, match="non-public"):
            await f.fetch(f"http://a.test:{origin.port}/")
        with pytest.raises(AddressRefused):
            await f.fetch(f"http://a.test:{origin.port}/", allow_private=["10.0.0.0/8", "b.test"])
        with pytest.raises(AddressRefused):
            await f.fetch(f"http://127.0.0.1:{origin.port}/")
        assert origin.connections == 0
        got = await f.fetch(f"http://a.test:{origin.port}/", allow_private=["a.test"])
        assert got.widened == [{"host": "a.test", "address": "127.0.0.1", "allowedBy": "a.test"}]


async def test_one_resolution_per_hop_the_second_answer_is_never_used(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/"] = response(200, b"first")
        # A rebinding resolver: 127.0.0.1 first (allowed here), then an address nobody listens on.
        f, resolver = make(ca, {"a.test": [["127.0.0.1"], ["127.0.0.2"]]})
        got = await f.fetch(f"http://a.test:{origin.port}/", allow_private=LOOP)
        assert got.body == b"first" and got.addresses == ["127.0.0.1"]
        assert resolver.calls == ["a.test"]


async def test_two_hostnames_on_one_ip_never_share_a_tls_connection(ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/"] = response(200, b"x")
        f, _ = make(ca)
        urls = [f"https://{h}:{origin.port}/" for h in ("a.test", "b.test", "a.test", "b.test")]
        await asyncio.gather(*(f.fetch(u, allow_private=LOOP) for u in urls))
        assert origin.connections == 4
        assert sorted(r.sni or "" for r in origin.requests) == ["a.test", "a.test", "b.test", "b.test"]
        assert all(r.sni == r.header("host").split(":")[0] for r in origin.requests)


async def test_certificate_is_verified_against_the_hostname(ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/"] = response(200, b"x")
        f, _ = make(ca, {"c.test": ["127.0.0.1"]})  # the certificate does not name c.test
        with pytest.raises(Exception, match="did not verify"):
            await f.fetch(f"https://c.test:{origin.port}/", allow_private=LOOP)
        f2 = Fetcher(resolver=TableResolver({"a.test": ["127.0.0.1"]}), environ={})  # system trust only
        with pytest.raises(Exception, match="did not verify"):
            await f2.fetch(f"https://a.test:{origin.port}/", allow_private=LOOP)


def _redirect(to: str, status: int = 302) -> bytes:
    return response(status, b"", Location=to)


async def test_five_redirects_are_followed_and_a_sixth_is_refused_naming_the_chain(ca: CA) -> None:
    async with Origin() as origin:
        for i in range(6):
            origin.routes[f"/r{i}"] = _redirect(f"/r{i + 1}")
        origin.routes["/r5"] = response(200, b"end")
        origin.routes["/s0"] = _redirect("/r0")
        f, resolver = make(ca)
        got = await f.fetch(f"http://a.test:{origin.port}/r0", allow_private=LOOP)
        assert got.body == b"end" and len(got.redirects) == 5
        assert resolver.calls == ["a.test"] * 6  # every hop resolved and validated again
        with pytest.raises(RedirectRefused) as e:
            await f.fetch(f"http://a.test:{origin.port}/s0", allow_private=LOOP)
        assert "more than 5 redirects" in e.value.message
        assert f"http://a.test:{origin.port}/s0 -> http://a.test:{origin.port}/r0" in e.value.message


async def test_a_redirect_loop_is_refused_naming_the_chain(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/a"] = _redirect("/b", 301)
        origin.routes["/b"] = _redirect(f"http://a.test:{origin.port}/a", 308)
        f, _ = make(ca)
        with pytest.raises(RedirectRefused, match="redirect loop") as e:
            await f.fetch(f"http://a.test:{origin.port}/a", allow_private=LOOP)
        assert e.value.message.count(f"{origin.port}/a") == 2 and f"{origin.port}/b" in e.value.message


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("ftp://a.test/x", "scheme 'ftp'"),
        ("http://user:pw@a.test/", "userinfo"),
        ("http://0x7f.1/", "non-canonical numeric"),
        ("http://a.test\\@b.test/", "backslash"),
        ("http://c.test/", "non-public"),  # c.test resolves to 10.0.0.1, not allowed
        ("http://[::1%25lo]/", "zone id"),
    ],
)
async def test_each_redirect_hop_is_validated_from_scratch(ca: CA, location: str, why: str) -> None:
    async with Origin() as origin:
        origin.routes["/go"] = _redirect(location)
        f, _ = make(ca, {"a.test": ["127.0.0.1"], "c.test": ["10.0.0.1"]})
        with pytest.raises(RedirectRefused) as e:
            await f.fetch(f"http://a.test:{origin.port}/go", allow_private=LOOP)
        assert why in e.value.message and f"a.test:{origin.port}/go" in e.value.message


async def test_credentials_are_dropped_across_origins_and_kept_within_one(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/same"] = _redirect("/landing")
        origin.routes["/cross"] = _redirect(f"http://b.test:{origin.port}/landing")
        origin.routes["/landing"] = response(200, b"here")
        f, _ = make(ca)
        hdrs = {"Authorization": "Bearer tok", "Cookie": "sid=1", "X-Keep": "yes"}
        await f.fetch(f"http://a.test:{origin.port}/same", allow_private=LOOP, headers=hdrs)
        landing = origin.requests[-1]
        assert landing.header("authorization") == "Bearer tok" and landing.header("cookie") == "sid=1"
        await f.fetch(f"http://a.test:{origin.port}/cross", allow_private=LOOP, headers=hdrs)
        landing = origin.requests[-1]
        assert landing.header("host") == f"b.test:{origin.port}"
        assert landing.header("authorization") is None and landing.header("cookie") is None
        assert landing.header("x-keep") == "yes"


async def _stall(req: Request, writer: asyncio.StreamWriter) -> bytes | None:
    await asyncio.sleep(30)
    return None


async def _partial(req: Request, writer: asyncio.StreamWriter) -> bytes | None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nabc")
    await writer.drain()
    await asyncio.sleep(30)
    return None


class SlowResolver:
    async def resolve(self, host: str) -> list:
        await asyncio.sleep(30)
        return []


async def _silent_tcp() -> tuple[asyncio.base_events.Server, int]:
    async def hold(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _full_backlog() -> tuple[socket.socket, list[socket.socket]]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    fill = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(s.getsockname())
        except BlockingIOError:
            pass
        fill.append(c)
    time.sleep(0.05)
    return s, fill


async def test_a_timeout_names_route_phase_and_elapsed_in_every_phase(ca: CA) -> None:
    t = 0.4
    async with Origin(ca.server_context()) as origin:
        origin.routes["/stall"] = _stall
        origin.routes["/partial"] = _partial
        f, _ = make(ca)
        cases: list[tuple[str, str, object]] = []

        async def expect(phase: str, route: str, coro) -> None:
            with pytest.raises(FetchTimeout) as e:
                await coro
            msg = e.value.message
            assert f"in the {phase} phase" in msg and f"route {route}" in msg and "timed out after 0." in msg, msg
            assert not e.value.transient and "not retried" in msg  # the whole deadline was spent
            cases.append((phase, route, msg))

        slow = Fetcher(resolver=SlowResolver(), environ={})
        await expect("resolve", "direct", slow.fetch("https://a.test/", timeout_s=t))
        s, fill = _full_backlog()
        try:
            port = s.getsockname()[1]
            await expect("connect", "direct", f.fetch(f"http://a.test:{port}/", timeout_s=t, allow_private=LOOP))
        finally:
            for c in [s, *fill]:
                c.close()
        async with ProxyServer("socks5", silent=True) as proxy:
            fp, _ = make(ca, env={"https_proxy": proxy.url()})
            await expect(
                "proxy handshake",
                f"socks5 proxy 127.0.0.1:{proxy.port}",
                fp.fetch(f"https://a.test:{origin.port}/", timeout_s=t, allow_private=LOOP),
            )
        server, port = await _silent_tcp()
        async with server:
            await expect("TLS", "direct", f.fetch(f"https://a.test:{port}/", timeout_s=t, allow_private=LOOP))
        await expect(
            "headers", "direct", f.fetch(f"https://a.test:{origin.port}/stall", timeout_s=t, allow_private=LOOP)
        )
        await expect(
            "body", "direct", f.fetch(f"https://a.test:{origin.port}/partial", timeout_s=t, allow_private=LOOP)
        )
    assert [c[0] for c in cases] == ["resolve", "connect", "proxy handshake", "TLS", "headers", "body"]


async def test_a_gzip_bomb_is_refused_while_streaming(ca: CA) -> None:
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    assert len(bomb) < 100_000
    async with Origin() as origin:
        origin.routes["/bomb"] = response(200, bomb, Content_Encoding="gzip")
        origin.routes["/ok"] = response(200, gzip.compress(b"small text"), Content_Encoding="gzip")
        two = gzip.compress(b"two ") + gzip.compress(b"members") + b"\0\0\0"  # and trailing padding
        origin.routes["/two"] = response(200, two, Content_Encoding="gzip")
        raw = zlib.compressobj(wbits=-15)
        origin.routes["/raw"] = response(200, raw.compress(b"raw deflate") + raw.flush(), Content_Encoding="deflate")
        f, _ = make(ca)
        with pytest.raises(BodyTooLarge, match=r"decompressed body .* over the 1048576-byte cap"):
            await asyncio.wait_for(  # a hang guard only
                f.fetch(f"http://a.test:{origin.port}/bomb", max_bytes=1 << 20, allow_private=LOOP), 60
            )
        got = await f.fetch(f"http://a.test:{origin.port}/ok", allow_private=LOOP)
        assert got.body == b"small text"
        assert (await f.fetch(f"http://a.test:{origin.port}/raw", allow_private=LOOP)).body == b"raw deflate"
        assert (await f.fetch(f"http://a.test:{origin.port}/two", allow_private=LOOP)).body == b"two members"


async def test_the_body_cap_is_exact(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/n"] = response(200, b"x" * 1000)
        f, _ = make(ca)
        assert len((await f.fetch(f"http://a.test:{origin.port}/n", max_bytes=1000, allow_private=LOOP)).body) == 1000
        with pytest.raises(BodyTooLarge):
            await f.fetch(f"http://a.test:{origin.port}/n", max_bytes=999, allow_private=LOOP)


@pytest.mark.parametrize(
    ("ctype", "body", "names"),
    [
        ("application/pdf", b"%PDF-1.7 ...", "pdftotext"),
        ("image/png", b"\x89PNG\r\n\x1a\n....", "view_image"),
        ("application/octet-stream", b"\x89PNG\r\n\x1a\n....", "view_image"),
        ("", b"%PDF-1.4 no type", "pdftotext"),
        ("video/mp4", b"....", "binary content"),
    ],
)
async def test_pdf_images_and_binaries_are_refused_naming_a_better_tool(
    ca: CA, ctype: str, body: bytes, names: str
) -> None:
    async with Origin() as origin:
        origin.routes["/f"] = response(200, body, ctype)
        f, _ = make(ca)
        with pytest.raises(ContentRefused, match=names):
            await f.fetch(f"http://a.test:{origin.port}/f", allow_private=LOOP)


async def test_http_errors_carry_the_status_and_some_are_transient(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/busy"] = response(503, b"later")
        f, _ = make(ca)
        with pytest.raises(HttpStatusError) as e:
            await f.fetch(f"http://a.test:{origin.port}/busy", allow_private=LOOP)
        assert e.value.status == 503 and e.value.transient
        with pytest.raises(HttpStatusError) as e:
            await f.fetch(f"http://a.test:{origin.port}/missing", allow_private=LOOP)
        assert e.value.status == 404 and not e.value.transient


async def test_a_black_holed_address_does_not_stall_the_next_one(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/"] = response(200, b"second address")
        hole = socket.socket()
        hole.bind(("127.0.0.2", origin.port))
        hole.listen(0)
        fill = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.2", origin.port))
            except BlockingIOError:
                pass
            fill.append(c)
        try:
            f, _ = make(ca, {"a.test": ["127.0.0.2", "127.0.0.1"]})
            deadline_s = 10.0
            t0 = time.monotonic()
            got = await f.fetch(f"http://a.test:{origin.port}/", timeout_s=deadline_s, allow_private=LOOP)
            assert got.body == b"second address"
            # The second address was tried after the stagger (250 ms), not once the first used up the deadline.
            assert time.monotonic() - t0 < deadline_s / 2
        finally:
            for c in [hole, *fill]:
                c.close()


def test_families_are_interleaved() -> None:
    import ipaddress

    from zuno.tools.web.backend import interleave

    ips = [ipaddress.ip_address(a) for a in ("::1", "::2", "127.0.0.1", "127.0.0.2", "127.0.0.3")]
    assert [str(a) for a in interleave(ips)] == ["::1", "127.0.0.1", "::2", "127.0.0.2", "127.0.0.3"]

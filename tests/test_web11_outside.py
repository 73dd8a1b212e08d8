"""Outside testing of webfetch / web_search (eleventh round): the tools used the way models and
users use them — through ``zuno call``, ``Session.step`` and the engine — against real servers on
loopback. Each test here failed before the fix it names (docs/spec-coverage.md, eleventh round)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import zuno
from test_web_outside import zcall
from zuno.tools.web.engine import Fetcher
from zuno.tools.web.errors import RedirectRefused
from zuno.tools.web.urls import parse_target

from webhelp import Origin, TableResolver, response

ALLOW = {"webfetch": {"allow_private": ["localhost", "127.0.0.0/8", "::1"]}}
LOOP = ["127.0.0.0/8", "::1"]


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


async def step(root: Path, calls: list[dict[str, Any]], cfg: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, config_overrides=cfg or ALLOW) as rt, rt.session() as s:
        res = await s.step(calls)
        return [r.to_json() for r in res.results]


def fetch(url: str, **more: Any) -> dict[str, Any]:
    return {"name": "webfetch", "arguments": {"url": url, **more}}


def moved(location: bytes, status: int = 302) -> bytes:
    return b"HTTP/1.1 %d Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % (status, location)


# --- a raw space in a Location ---------------------------------------------------------------------


async def test_a_location_with_a_raw_space_is_followed_percent_encoded(workspace: Path) -> None:
    """Before: ``Location: /a b`` (a file name with a space, as many servers send it) was refused
    ("it contains whitespace ... Percent-encode a space as %20" — advice the model cannot act on),
    where every browser follows it to ``/a%20b`` (WHATWG URL parser). Spaces in the query and a
    no-break space (as UTF-8) are encoded the same way."""
    async with Origin() as origin:
        origin.routes["/old"] = moved(b"/files/annual report.pdf.html?q=a b")
        origin.routes["/files/annual%20report.pdf.html"] = response(200, b"the report")
        origin.routes["/nb"] = moved("/caf\u00e9\u00a0menu".encode())
        origin.routes["/caf%C3%A9%C2%A0menu"] = response(200, b"the menu")
        rc, rec, _ = await zcall(workspace, {"url": f"http://localhost:{origin.port}/old"})
        assert rc == 0 and rec["text"].endswith("the report"), rec["text"]
        assert rec["metadata"]["finalUrl"].endswith("/files/annual%20report.pdf.html?q=a%20b")
        [res] = await step(workspace, [fetch(f"http://localhost:{origin.port}/nb")])
        assert res["outcome"] == "ok" and res["text"].endswith("the menu"), res["text"]
        assert [r.target for r in origin.requests] == [
            "/old",
            "/files/annual%20report.pdf.html?q=a%20b",
            "/nb",
            "/caf%C3%A9%C2%A0menu",
        ]


async def test_a_spaced_location_is_still_checked_against_the_address_and_scheme_rules() -> None:
    """The encoded Location goes through the same parser and checks as any hop: another scheme, a
    space in the host, a tab, a numeric loopback spelling — all refused, nothing sent there (a
    private address behind a spaced Location: ``web11_netns_cases.py``)."""
    async with Origin() as origin:
        origin.routes["/ftp"] = moved(b"ftp://a.test/a b")
        origin.routes["/host"] = moved(b"http://a .test/x")
        origin.routes["/rel"] = moved(b"//a .test/x")
        origin.routes["/tab"] = moved(b"/a b\tc")
        origin.routes["/num"] = moved(b"http://2130706433/a b")
        f = Fetcher(resolver=TableResolver({"a.test": ["127.0.0.1"]}), environ={})
        base = f"http://a.test:{origin.port}"
        for path, why in [
            ("/ftp", "scheme 'ftp'"),
            ("/host", "host contains a space"),
            ("/rel", "host contains a space"),
            ("/tab", "U+0009"),
            ("/num", "127.0.0.1"),
        ]:
            with pytest.raises(RedirectRefused) as e:
                await f.fetch(base + path, allow_private=["a.test"])
            assert why in e.value.message, (path, e.value.message)
        assert [r.target for r in origin.requests] == ["/ftp", "/host", "/rel", "/tab", "/num"]


def test_raw_characters_are_percent_encoded_as_a_browser_sends_them() -> None:
    """Before: ``"``, ``<``, ``>``, backtick, ``{``, ``}`` and ``^`` in a path (and ``"``, ``'``,
    ``<``, ``>`` in a query) were sent raw, which strict servers answer with 400 and which a
    permission pattern saw spelt two ways; now the WHATWG path / special-query percent-encode sets."""
    t = parse_target("http://a.test/p\"<>`{}^|'[]?q=\"<>'`{}^|?")
    assert t.path == "/p%22%3C%3E%60%7B%7D%5E|'[]?q=%22%3C%3E%27`{}^|?"
    assert parse_target('http://a.test/%22x"').path == "/%22x%22"


# --- charset labels as the WHATWG Encoding Standard reads them --------------------------------------


async def test_charset_labels_are_read_as_browsers_read_them(workspace: Path) -> None:
    """Before: a label went through Python's codec aliases. ``us-ascii`` (a common default) with
    Windows-1252 quotes failed as ASCII and charset-normalizer read the page as Cyrillic cp1125
    (``УquotedФ``); ``shift_jis`` with ①/Ⅲ (windows-31j, what every Japanese Shift_JIS page is)
    came back as EBCDIC (cp037) garbage; ``x-sjis`` was unknown; ``iso-8859-11`` lost its curly
    quotes to C1 controls; ``utf-7`` (which no browser decodes) turned ``+ADw-script+AD4-`` into
    ``<script>``; ``iso-2022-kr`` (browsers: the replacement decoder) was decoded."""
    pages = {
        "/ascii": ("text/plain; charset=us-ascii", "“quoted” – 5 €".encode("cp1252"), "“quoted” – 5 €", "cp1252"),
        "/sjis": ("text/plain; charset=shift_jis", "①番 Ⅲ型～".encode("cp932"), "①番 Ⅲ型～", "cp932"),
        "/xsjis": ("text/plain; charset=x-sjis", "日本語①".encode("cp932"), "日本語①", "cp932"),
        "/thai": ("text/plain; charset=iso-8859-11", "ภาษา “ไทย”".encode("cp874"), "ภาษา “ไทย”", "cp874"),
        "/utf7": ("text/plain; charset=utf-7", b"+ADw-script+AD4-", "+ADw-script+AD4-", "utf-8"),
        "/kr": ("text/plain; charset=iso-2022-kr", b"\x1b$)C\x0e\x21\x21", "\ufffd", "replacement"),
        "/meta": (
            "text/html",
            b'<html><head><meta charset="x-user-defined"></head><body><p>caf\xe9</p></body></html>',
            "café",
            "cp1252",
        ),
    }
    async with Origin() as origin:
        for path, (ctype, body, _, _) in pages.items():
            origin.routes[path] = response(200, body, ctype=ctype)
        results = await step(workspace, [fetch(f"http://localhost:{origin.port}{p}") for p in pages])
    for (path, (_, _, text, charset)), res in zip(pages.items(), results, strict=True):
        assert res["outcome"] == "ok", (path, res["text"])
        assert res["text"].rstrip().endswith(text), (path, res["text"])
        assert res["metadata"]["charset"] == charset, (path, res["metadata"])


# --- an oversized response header block ------------------------------------------------------------


async def test_response_headers_over_the_limit_are_refused_once_naming_the_limit(workspace: Path) -> None:
    """Before: ``broke the HTTP protocol in the headers phase (RemoteProtocolError: Receive buffer
    too long)`` — no limit named, and retried twice (the same headers each time). Now the limit
    (a named constant, httpcore's own bound) is named, and a block just under it is read."""
    import httpcore

    from zuno.tools.web.engine import MAX_RESPONSE_HEADER_BYTES

    assert httpcore.AsyncHTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE == MAX_RESPONSE_HEADER_BYTES

    def headers_of(total: int) -> bytes:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
        pad = total - len(head) - len(b"X-Pad: \r\n\r\n")
        return head + b"X-Pad: " + b"v" * pad + b"\r\n\r\nok"

    async with Origin() as origin:
        origin.routes["/under"] = headers_of(MAX_RESPONSE_HEADER_BYTES - 1024)
        origin.routes["/over"] = headers_of(MAX_RESPONSE_HEADER_BYTES + 1024)
        under, over = await step(
            workspace, [fetch(f"http://localhost:{origin.port}/under"), fetch(f"http://localhost:{origin.port}/over")]
        )
        assert under["outcome"] == "ok" and under["text"].endswith("ok"), under["text"]
        assert over["outcome"] == "error" and "headers over 100 KiB" in over["text"], over["text"]
        assert "not retried" in over["text"]
        assert [r.target for r in origin.requests].count("/over") == 1


# --- web_search domain filters read a result's host as webfetch does ------------------------------


async def test_web_search_domain_filters_read_a_results_host_as_a_fetch_would(workspace: Path) -> None:
    """Before: a result's host came from ``urlsplit`` and entries went through IDNA 2003. With
    ``allowed_domains: ["docs.example"]``, ``https://evil.example\\@docs.example/`` and
    ``https://evil.example\\.docs.example/`` passed (a browser goes to evil.example: a backslash
    ends the host); ``blocked_domains: ["faß.de"]`` blocked ``fass.de`` and let the real faß.de
    (``xn--fa-hia.de``, which webfetch reaches) through, and ``https://blocked%2eexample/``
    (which browsers read as blocked.example) was not blocked."""
    results = [
        ("good", "https://docs.example/page"),
        ("backslash-at", "https://evil.example\\@docs.example/"),
        ("backslash-dot", "https://evil.example\\.docs.example/"),
        ("userinfo", "https://docs.example@evil.example/"),
        ("spaced", "https://docs.example/a b"),
        ("fass", "https://xn--fa-hia.de/"),
        ("fass-unicode", "https://faß.de/x"),
        ("escaped", "https://blocked%2eexample/"),
        ("other", "https://other.example/"),
    ]
    body = json.dumps({"results": [{"title": t, "url": u, "content": "c"} for t, u in results]}).encode()
    async with Origin() as origin:
        origin.routes["/search"] = response(200, body, ctype="application/json")
        cfg = {"web_search": {"providers": {"sx": {"type": "searxng", "base_url": f"http://127.0.0.1:{origin.port}"}}}}
        search = lambda **more: {"name": "web_search", "arguments": {"queries": ["q"], "max_results": 20, **more}}  # noqa: E731
        allowed, blocked, unfiltered = await step(
            workspace,
            [
                search(allowed_domains=["docs.example"]),
                search(blocked_domains=["faß.de", "blocked.example"]),
                search(),
            ],
            cfg,
        )

    def titles(rec: dict[str, Any]) -> list[str]:
        assert rec["outcome"] == "ok", rec["text"]
        return [t for t, _ in results if f". {t}\n" in rec["text"]]

    assert titles(allowed) == ["good", "spaced"]
    assert titles(blocked) == ["good", "spaced", "other"]
    assert len(titles(unfiltered)) == len(results)  # no filter: every result, as the provider sent it


# --- extra slashes before a Location's host ---------------------------------------------------------


async def test_a_location_with_three_slashes_names_a_host_as_in_a_browser() -> None:
    """Before: ``Location: ///b.test/x`` was joined as a path on the current host
    (``http://a.test/b.test/x``, a 404) where browsers go to b.test; now it names b.test, whose
    addresses are checked like any hop's (b.test not allowed: refused, nothing sent there)."""
    async with Origin() as origin:
        p = origin.port
        origin.routes["/three"] = moved(b"///b.test:%d/x" % p)
        origin.routes["/four"] = moved(b"http:////b.test:%d/x" % p)
        origin.routes["/x"] = response(200, b"landed")
        f = Fetcher(resolver=TableResolver({"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]}), environ={})
        for path in ("/three", "/four"):
            got = await f.fetch(f"http://a.test:{p}{path}", allow_private=["a.test", "b.test"])
            assert got.final_url == f"http://b.test:{p}/x" and got.body == b"landed"
        assert [r.header("host") for r in origin.requests] == [f"a.test:{p}", f"b.test:{p}"] * 2
        with pytest.raises(RedirectRefused, match=r"b\.test resolves only to non-public"):
            await f.fetch(f"http://a.test:{p}/three", allow_private=["a.test"])


# --- deeply nested HTML ------------------------------------------------------------------------------


async def test_deeply_nested_html_converts_instead_of_failing_inside_the_tool(workspace: Path) -> None:
    """Before: a page nesting 400 elements deep — 400 unclosed ``<p>`` or ``<font>`` tags in old
    hand-written HTML, which html.parser nests, or a hostile page — failed with ``webfetch failed
    inside the tool: RecursionError`` (markdownify recurses once per level); 5000 nested tables also
    spent minutes in the numbered-code pass first. Now elements at ``MAX_HTML_DEPTH`` keep their
    text and lose the elements inside; a page nested less deeply converts as before."""
    from zuno.tools.web.content import MAX_HTML_DEPTH

    under = MAX_HTML_DEPTH - 3  # body and html count too
    pages = {
        "/p": "<html><body>" + "<p>para " * 400 + "the end</body></html>",
        "/font": "<html><body>" + "<font size=2>" * 2000 + "old <b>page</b> text</body></html>",
        "/tables": "<html><body>" + "<table><tr><td>" * 5000 + "cell text" + "</td></tr></table>" * 5000,
        "/under": "<html><body>" + "<div>" * under + "<a href='/deep'>a link</a>" + "</div>" * under,
    }
    async with Origin() as origin:
        for path, html in pages.items():
            origin.routes[path] = response(200, html.encode(), ctype="text/html; charset=utf-8")
        recs = await step(workspace, [fetch(f"http://localhost:{origin.port}{p}") for p in pages])
        p, font, tables, kept = recs
        for rec in recs:
            assert rec["outcome"] == "ok", rec["text"][:300]
        assert p["text"].count("para") == 400 and "the end" in p["text"]
        assert "old" in font["text"] and "page" in font["text"] and "text" in font["text"]
        assert "cell text" in tables["text"]
        assert f"[a link](http://localhost:{origin.port}/deep)" in kept["text"], kept["text"][-300:]


# --- limits crossed at their edges (held: no change) ------------------------------------------------


async def test_the_error_body_limits_are_crossed_at_their_edges(workspace: Path) -> None:
    """``WEBFETCH_ERROR_BODY_CHARS`` (2,000 characters shown) and ``WEBFETCH_ERROR_BODY_BYTES``
    (64 KiB read, counted decompressed) at one under and one over."""
    from zuno import limits

    chars, cap = limits.WEBFETCH_ERROR_BODY_CHARS, limits.WEBFETCH_ERROR_BODY_BYTES

    def hidden_hint(total: int) -> bytes:  # a page whose only text ends at byte ``total``
        head, tail = b"<html><body><div title='", b"'></div><p>HINT</p></body></html>"
        return head + b"x" * (total - len(head) - len(tail)) + tail

    async with Origin() as origin:
        origin.routes["/fits"] = response(404, b"y" * chars)
        origin.routes["/cut"] = response(404, b"y" * (chars + 1))
        origin.routes["/read"] = response(404, hidden_hint(cap), ctype="text/html")
        origin.routes["/unread"] = response(404, hidden_hint(cap + 1), ctype="text/html")
        base = f"http://localhost:{origin.port}"
        fits, cut, read, unread = (
            r["text"] for r in await step(workspace, [fetch(base + p) for p in ("/fits", "/cut", "/read", "/unread")])
        )
    assert ("y" * chars) in fits and "not shown" not in fits
    assert ("y" * chars) in cut and ("y" * (chars + 1)) not in cut and "the rest of the body is not shown" in cut
    assert "HINT" in read and "HINT" not in unread, unread[-200:]


async def test_an_oversized_connect_reply_is_refused_at_its_limit() -> None:
    """``backend._CONNECT_REPLY_MAX`` (16 KiB): a proxy's CONNECT reply just under it is read, one
    over it is refused naming the proxy, not falling back to a direct connection. Before: a reply of
    the limit plus one byte was still read (the check ran before the last byte)."""
    import asyncio

    from zuno.tools.web.backend import _CONNECT_REPLY_MAX
    from zuno.tools.web.errors import ProxyFailed

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, size: int) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\n"
        pad = size - len(head) - len(b"X: \r\n\r\n")
        writer.write(head + b"X: " + b"p" * pad + b"\r\n\r\n")
        await writer.drain()
        up_r, up_w = await asyncio.open_connection("127.0.0.1", origin.port)
        up_w.write(await reader.readuntil(b"\r\n\r\n"))
        writer.write(await up_r.read(65536))
        await writer.drain()
        writer.close()

    async with Origin() as origin:
        origin.routes["/"] = response(200, b"through")
        for size, ok in ((_CONNECT_REPLY_MAX, True), (_CONNECT_REPLY_MAX + 1, False)):
            server = await asyncio.start_server(lambda r, w, n=size: proxy(r, w, n), "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            f = Fetcher(resolver=TableResolver({"a.test": ["127.0.0.1"]}), environ={"HTTP_PROXY": f"127.0.0.1:{port}"})
            try:
                if ok:
                    assert (await f.fetch(f"http://a.test:{origin.port}/", allow_private=LOOP)).body == b"through"
                else:
                    with pytest.raises(ProxyFailed, match="oversized CONNECT reply"):
                        await f.fetch(f"http://a.test:{origin.port}/", allow_private=LOOP)
            finally:
                server.close()

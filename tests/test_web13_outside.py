"""Outside testing of webfetch / web_search (thirteenth round): the tools used as an attacker would,
against real servers on loopback. Each test here failed before the fix it names
(docs/spec-coverage.md, thirteenth round)."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.tools.web.engine import Fetcher
from zuno.tools.web.errors import BodyTooLarge, ContentRefused, HttpStatusError

from webhelp import Origin, Request, response

LOOP = ["127.0.0.0/8"]
ALLOW = {"webfetch": {"allow_private": LOOP}}


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


async def step(root: Path, calls: list[dict[str, Any]], cfg: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, config_overrides=cfg or ALLOW) as rt, rt.session() as s:
        res = await s.step(calls)
        return [r.to_json() for r in res.results]


def chunked_head(ctype: str, encoding: str = "") -> bytes:
    enc = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    return f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{enc}Transfer-Encoding: chunked\r\n\r\n".encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# --- Retry-After with non-ASCII digits -------------------------------------------------------------


async def test_a_retry_after_of_superscript_digits_is_an_http_error_not_a_crash() -> None:
    """Before: ``Retry-After: ²`` (a Latin-1 byte str.isdigit accepts) on a 429 made float() raise
    ValueError out of webfetch: the call crashed instead of reporting the status."""
    async with Origin() as origin:
        origin.routes["/busy"] = response(429, b"slow down", Retry_After="\u00b2")
        with pytest.raises(HttpStatusError) as got:
            await Fetcher().fetch(origin.url(path="/busy"), allow_private=LOOP, timeout_s=10)
    assert got.value.status == 429 and "slow down" in got.value.message


# --- sniffing does not depend on how the body is chunked -------------------------------------------


async def test_a_binary_body_dripped_a_byte_at_a_time_is_still_sniffed() -> None:
    """Before: only the first decoded chunk was sniffed. A server that sent one harmless byte first
    ("x", or "%" of "%PDF-") got NUL-filled octet-stream content and a PDF served as text/plain
    returned as text."""

    def dripping(ctype: str, first: bytes, rest: bytes) -> Any:
        async def handler(req: Request, w: asyncio.StreamWriter) -> bytes:
            w.write(chunked_head(ctype) + chunk(first))
            await w.drain()
            await asyncio.sleep(0.05)
            return chunk(rest) + b"0\r\n\r\n"

        return handler

    async with Origin() as origin:
        origin.routes["/blob"] = dripping("application/octet-stream", b"x", b"\0\0\0\x01\x02binary\0" * 20)
        origin.routes["/pdf"] = dripping("text/plain", b"%", b"PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
        origin.routes["/text"] = dripping("text/plain", b"h", b"ello, plain text")
        f = Fetcher()
        with pytest.raises(ContentRefused, match="binary content"):
            await f.fetch(origin.url(path="/blob"), allow_private=LOOP, timeout_s=10)
        with pytest.raises(ContentRefused, match="is a PDF"):
            await f.fetch(origin.url(path="/pdf"), allow_private=LOOP, timeout_s=10)
        ok = await f.fetch(origin.url(path="/text"), allow_private=LOOP, timeout_s=10)
    assert ok.body == b"hello, plain text"


# --- compressed bodies: the bytes on the wire are bounded too --------------------------------------


def endless(first: bytes, filler: bytes) -> Any:
    async def handler(req: Request, w: asyncio.StreamWriter) -> None:
        w.write(chunked_head("text/plain", "gzip") + chunk(first))
        try:
            for _ in range(20_000):  # 80 MB at most: far past the cap, never reached when it holds
                w.write(chunk(filler))
                await w.drain()
        except ConnectionError:
            pass
        return None

    return handler


@pytest.mark.parametrize(
    ("first", "filler"),
    [
        (gzip.compress(b"hello"), b"\0" * 4096),  # padding after the gzip stream's end
        (gzip.compress(b""), gzip.compress(b"") * 200),  # endless empty gzip members
    ],
    ids=["padding-after-the-end", "empty-members"],
)
async def test_a_gzip_body_that_decompresses_to_nothing_is_refused_at_the_cap(first: bytes, filler: bytes) -> None:
    """Before: only decompressed bytes counted against max_bytes. Bytes after the gzip stream's end
    (ignored as padding) or endless empty gzip members were read until the deadline: with a
    100 KB cap, over 600 MB came in during a 3 s call, which then ended as a timeout."""
    async with Origin() as origin:
        origin.routes["/gz"] = endless(first, filler)
        started = time.monotonic()
        with pytest.raises(BodyTooLarge, match="as sent"):
            await Fetcher().fetch(origin.url(path="/gz"), allow_private=LOOP, timeout_s=20, max_bytes=100_000)
    assert time.monotonic() - started < 10


async def test_a_gzip_body_within_the_cap_still_decompresses() -> None:
    text = b"".join(b"line %d of a compressible page\n" % i for i in range(5000))
    packed = gzip.compress(text)
    async with Origin() as origin:
        origin.routes["/page"] = response(200, packed, Content_Encoding="gzip")
        got = await Fetcher().fetch(origin.url(path="/page"), allow_private=LOOP, timeout_s=10, max_bytes=len(text))
    assert got.body == text


# --- request headers from the arguments ------------------------------------------------------------


async def test_a_header_name_or_value_the_wire_cannot_carry_is_refused_before_sending(workspace: Path) -> None:
    """Before: a name that is not a token ("X(", "X Y" was caught, "X\\tY" and "X(" were not) was
    refused by h11 only while sending, reported as "broke the HTTP protocol" (blaming the server)
    and marked transient, so the runtime retried it; a value with a control character (U+0001,
    DEL) was sent as it was."""
    async with Origin() as origin:
        origin.routes["/"] = response(200, b"ok")
        url = origin.url(path="/")
        recs = await step(
            workspace,
            [
                {"name": "webfetch", "arguments": {"url": url, "headers": {"X(": "1"}}},
                {"name": "webfetch", "arguments": {"url": url, "headers": {"X\tY": "1"}}},
                {"name": "webfetch", "arguments": {"url": url, "headers": {"X-A": "a\x01b"}}},
                {"name": "webfetch", "arguments": {"url": url, "headers": {"X-A": "a\x7fb"}}},
                {"name": "webfetch", "arguments": {"url": url, "headers": {"X-Ok": "tab\tand caf\u00e9"}}},
            ],
        )
        sent = list(origin.requests)
    for rec in recs[:4]:
        assert rec["outcome"] == "blocked" and rec["block_kind"] == "invalid_arguments", rec
        assert "header" in rec["text"], rec["text"]
    assert recs[4]["outcome"] == "ok", recs[4]["text"]
    assert len(sent) == 1 and sent[0].header("X-Ok") is not None


# --- web_search ------------------------------------------------------------------------------------


async def test_a_line_break_in_a_result_url_cannot_forge_a_result(workspace: Path) -> None:
    """Before: titles and snippets were put on one line but the URL was printed as the provider
    sent it, so ``https://a.example/x\\n2. Injected\\n   https://evil.example/`` showed a second,
    forged result under its own number."""
    forged = "https://a.example/x\n2. Injected\n   https://evil.example/\u2028x"
    body = json.dumps({"results": [{"title": "real", "url": forged, "content": "c"}]}).encode()
    async with Origin() as origin:
        origin.routes["/search"] = response(200, body, ctype="application/json")
        cfg = {"web_search": {"providers": {"sx": {"type": "searxng", "base_url": f"http://127.0.0.1:{origin.port}"}}}}
        (rec,) = await step(workspace, [{"name": "web_search", "arguments": {"queries": ["q"]}}], cfg)
    assert rec["outcome"] == "ok", rec["text"]
    lines = rec["text"].splitlines()
    assert not any(line.startswith("2.") for line in lines), rec["text"]
    assert "   https://a.example/x%0A2.%20Injected%0A%20%20%20https://evil.example/%E2%80%A8x" in lines, rec["text"]


async def test_an_api_key_with_a_line_break_is_a_config_error_naming_the_variable(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a key variable with a line break in it (``KEY=$'sk-1\\r\\nX-Evil: 1'``, or a key read
    from a file with its newline) failed every search as "failed: protocol", as if the provider
    had broken the HTTP protocol. Now it is refused before anything is sent, naming the variable
    and never its value."""
    monkeypatch.setenv("ZUNO_W13_KEY", "sk-w13secret\r\nX-Evil: 1")
    async with Origin() as origin:
        origin.routes["/search"] = response(200, b'{"results": []}', ctype="application/json")
        base = f"http://127.0.0.1:{origin.port}"
        sx = {"type": "searxng", "base_url": base, "api_key_env": "ZUNO_W13_KEY"}
        cfg = {"web_search": {"providers": {"sx": sx}}}
        (rec,) = await step(workspace, [{"name": "web_search", "arguments": {"queries": ["q"]}}], cfg)
        sent = list(origin.requests)
    assert rec["outcome"] == "blocked" and rec["block_kind"] == "unavailable", rec["text"]
    assert "ZUNO_W13_KEY" in rec["text"] and "line break" in rec["text"], rec["text"]
    assert "w13secret" not in json.dumps(rec) and not sent


async def test_a_provider_answer_nested_too_deeply_fails_that_query_only(workspace: Path) -> None:
    """Before: ``[[[[...]]]]`` nested past the recursion limit (200 KB, well under the response cap)
    raised RecursionError out of json.loads, which is not a ValueError: the whole call crashed
    ("failed inside the tool") and the other queries' results were lost with it."""
    deep = b"[" * 100_000 + b"]" * 100_000
    good = json.dumps({"results": [{"title": "fine", "url": "https://ok.example/", "content": "c"}]}).encode()

    async def answer(req: Request, w: asyncio.StreamWriter) -> bytes:
        return response(200, deep if "q=deep" in req.target else good, ctype="application/json")

    async with Origin() as origin:
        origin.routes["/search"] = answer
        cfg = {"web_search": {"providers": {"sx": {"type": "searxng", "base_url": f"http://127.0.0.1:{origin.port}"}}}}
        (rec,) = await step(workspace, [{"name": "web_search", "arguments": {"queries": ["deep", "good"]}}], cfg)
    assert rec["outcome"] == "ok", rec["text"]
    assert "nested too deeply" in rec["text"] and "1. fine" in rec["text"], rec["text"]


# --- the call's timeout covers the HTML conversion ---------------------------------------------------


async def test_the_html_conversion_is_under_the_calls_timeout(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the timeout covered the fetch only. A page of many small elements (a few MB of
    ``<p>`` or table cells, well under max_bytes) was fetched in milliseconds and then converted
    to Markdown for tens of seconds (3 MB of ``<p>``: 20 s; 300 KB of nested quotes: 12 s, and a
    10 MiB one for minutes), whatever timeout_ms said.
    The floor that lets a small page fetched near the deadline still convert is lowered here so
    a small page shows the limit."""
    from zuno.tools.web import fetch_tool

    monkeypatch.setattr(fetch_tool, "CONVERT_FLOOR_S", 0.05)
    # 100 KB that markdownify takes seconds over (each of 120 levels re-indents all the text inside).
    page = b"<blockquote>" * 120 + b"<p>line</p>" * 9000 + b"</blockquote>" * 120
    async with Origin() as origin:
        origin.routes["/big"] = response(200, page, ctype="text/html; charset=utf-8")
        origin.routes["/small"] = response(200, b"<h1>Small</h1><p>page</p>", ctype="text/html")
        big, small = await step(
            workspace,
            [
                {"name": "webfetch", "arguments": {"url": origin.url(path="/big"), "timeout_ms": 1000}},
                {"name": "webfetch", "arguments": {"url": origin.url(path="/small"), "timeout_ms": 1000}},
            ],
        )
    assert big["outcome"] == "error" and "convert phase" in big["text"] and '"raw"' in big["text"], big["text"]
    assert small["outcome"] == "ok" and "# Small" in small["text"], small["text"]


# --- a caller's User-Agent / Accept replaces Zuno's --------------------------------------------------


class RawHeads:
    """A loopback server that keeps every request head exactly as it came (repeated lines too)."""

    def __init__(self, body: bytes, ctype: str) -> None:
        self.heads: list[list[str]] = []
        self.answer = response(200, body, ctype=ctype)
        self.port = 0

    async def __aenter__(self) -> RawHeads:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append([line.split(":", 1)[0].lower() for line in head.decode("latin-1").split("\r\n")[1:] if line])
        writer.write(self.answer)
        await writer.drain()
        writer.close()


async def test_a_callers_user_agent_and_accept_replace_zunos(workspace: Path) -> None:
    """Before: ``headers: {"User-Agent": ...}`` sent two User-Agent lines (Zuno's first, which servers
    read), and every SearXNG / Brave request carried two Accept lines (Zuno's and the provider's)."""
    async with RawHeads(b'{"results": []}', "application/json") as server:
        base = f"http://127.0.0.1:{server.port}"
        cfg = {**ALLOW, "web_search": {"providers": {"sx": {"type": "searxng", "base_url": base}}}}
        fetched, searched = await step(
            workspace,
            [
                {"name": "webfetch", "arguments": {"url": f"{base}/", "headers": {"user-agent": "mine/1"}}},
                {"name": "web_search", "arguments": {"queries": ["q"]}},
            ],
            cfg,
        )
        heads = list(server.heads)
    assert fetched["outcome"] == "ok" and searched["outcome"] == "ok", (fetched["text"], searched["text"])
    assert len(heads) == 2
    for names in heads:
        assert names.count("user-agent") == 1 and names.count("accept") <= 1, names


# --- an undeclared legacy charset ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "charset"),
    [
        ("café naïve", "latin-1"),
        ("Le garçon a mangé une crêpe à la pâtisserie près de chez lui, déjà.", "latin-1"),
        ("Привет, как дела? Это тест кодировки.", "cp1251"),
        ("Zażółć gęślą jaźń, to jest test.", "cp1250"),
    ],
)
async def test_text_without_a_charset_reads_as_a_browser_reads_it(text: str, charset: str) -> None:
    """Before: with no charset anywhere and bytes that are not UTF-8, charset_normalizer's guess
    among every codec Python has decided alone: "café naïve" came back as "cafﻠ naﺅve" (cp1006,
    an Urdu code page no browser knows) and French as "garēon ... crźpe" (cp1257). Now the guess
    is among the web's encodings, and windows-1252 — the browsers' fallback — wins unless the
    guess reads clearly better (Cyrillic and Polish are still recognised)."""
    async with Origin() as origin:
        origin.routes["/t"] = response(200, text.encode(charset), ctype="text/plain")
        got = await Fetcher().fetch(origin.url(path="/t"), allow_private=LOOP, timeout_s=10)
    from zuno.tools.web.content import decode

    assert decode(got.body, got.content_type)[0] == text


# --- an oversized chunk header is not retried --------------------------------------------------------


async def test_an_oversized_chunk_header_is_a_final_protocol_error_not_a_transient_one() -> None:
    """Before: a chunk-size line with 300 KB of chunk extensions (past h11's 100 KiB bound) was
    reported as the body "broke off" and marked transient, so the runtime fetched the same page
    again to meet the same line; oversized response headers were already final."""
    from zuno.tools.web.errors import ProtocolFailed

    async def handler(req: Request, w: asyncio.StreamWriter) -> bytes:
        return chunked_head("text/plain") + b"5;" + b"a" * 300_000 + b"\r\nhello\r\n0\r\n\r\n"

    async with Origin() as origin:
        origin.routes["/ext"] = handler
        with pytest.raises(ProtocolFailed) as got:
            await Fetcher().fetch(origin.url(path="/ext"), allow_private=LOOP, timeout_s=10)
    assert got.value.transient is False and "chunk header" in got.value.message

"""webfetch's HTML conversion stops when its call stops waiting (sixteenth round): the parse is fed
in chunks with a check between two, so a worker thread whose call timed out (or was cancelled) no
longer parses the rest of a large page. Real pages on a loopback server, real threads."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.tools.web import content

from webhelp import Origin, response

ALLOW = {"webfetch": {"allow_private": ["127.0.0.0/8"]}}


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


def blog_page(posts: int) -> str:
    """A page shaped like a long blog index: headings, links with query strings, entities, lists,
    tables and inline scripts, a few hundred bytes per post."""
    body = "".join(
        f'<div class="post" id="p{i}"><h2><a href="/posts/{i}">Post {i}</a></h2>'
        f'<p>Some <b>bold</b> and <i>italic</i> text with a <a href="https://example.org/{i}?q=a&amp;b=c">link'
        f"</a> &mdash; and an entity &lt;tag&gt; here.</p><ul><li>one</li><li>two</li></ul>"
        f'<table><tr><td>{i}</td><td>cell</td></tr></table><script>var x{i} = "<b>";</script></div>\n'
        for i in range(posts)
    )
    head = "<head><title>Big</title><style>p{color:red}</style></head>"
    return f"<!DOCTYPE html><html>{head}<body>{body}</body></html>"


def parse_seconds(html: str) -> float:
    """How long one whole parse of html takes here, now (the reference the lags are compared with)."""
    from bs4 import BeautifulSoup

    t = time.monotonic()
    BeautifulSoup(html, "html.parser")
    return time.monotonic() - t


async def test_a_timed_out_conversion_stops_parsing_the_page(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: after the convert-phase timeout the call returned its error, but the worker thread
    went on parsing the whole page (one html.parser feed of all of it): seconds of a core per
    timed-out call, and the next job for that thread waited. Now the thread stops within a chunk:
    the executor's one worker is free again well before a whole parse could have finished."""
    from zuno.tools.web import fetch_tool

    monkeypatch.setattr(fetch_tool, "CONVERT_FLOOR_S", 0.05)
    posts = 20_000  # about 7 MB, under the default max_bytes
    page = blog_page(posts).encode()
    whole = parse_seconds(blog_page(posts // 10)) * 10  # a tenth of the page, parsed here, times ten
    loop = asyncio.get_running_loop()
    worker = ThreadPoolExecutor(max_workers=1)  # the conversion's thread is the only one
    loop.set_default_executor(worker)
    try:
        async with Origin() as origin:
            origin.routes["/big"] = response(200, page, ctype="text/html; charset=utf-8")
            async with zuno.Runtime(root=workspace, config_overrides=ALLOW) as rt, rt.session() as s:
                call = {"name": "webfetch", "arguments": {"url": origin.url(path="/big"), "timeout_ms": 1500}}
                res = await s.step([call])
                returned = time.monotonic()
                rec: dict[str, Any] = res.results[0].to_json()
                free = await loop.run_in_executor(None, time.monotonic)  # runs once the worker is idle
    finally:
        worker.shutdown(wait=True)
    assert rec["outcome"] == "error" and "convert phase" in rec["text"], rec["text"]
    # The worker was busy after the error for a small part of what the rest of the parse takes.
    assert free - returned < whole / 4, (free - returned, whole)


async def test_setting_the_stop_flag_ends_a_conversion_in_its_thread() -> None:
    """The cancel path: a call that stops waiting (cancelled, not timed out) sets the flag, and the
    conversion in its thread raises ConversionTimeout within a chunk of the parse."""
    html = blog_page(20_000)
    whole = parse_seconds(blog_page(2_000)) * 10
    stop = threading.Event()
    outcome: list[BaseException | str] = []
    ended = threading.Event()

    def convert() -> None:
        try:
            outcome.append(content.html_to_markdown(html, "https://example.org/", None, stop))
        except BaseException as e:  # the test reads what the thread ended with
            outcome.append(e)
        ended.set()

    t = threading.Thread(target=convert)
    t.start()
    await asyncio.sleep(0.2)
    set_at = time.monotonic()
    stop.set()
    await asyncio.to_thread(ended.wait)
    done = time.monotonic()
    t.join()
    assert isinstance(outcome[0], content.ConversionTimeout), outcome
    assert done - set_at < whole / 4, (done - set_at, whole)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_a_chunked_parse_builds_the_same_tree(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Feeding html.parser in pieces changes nothing: a tag, entity, comment or script split
    between two feeds is held until the next (checked down to one character a feed)."""
    from bs4 import BeautifulSoup

    monkeypatch.setattr(content, "PARSE_CHUNK_CHARS", chunk)
    pages = [
        blog_page(5),
        '<p>a &amp; b &mdash; c &#x41; &notanentity; &amp</p><script>if (a<b) { x="</p>" }</script>'
        '<!-- a comment --><textarea><b>x</b></textarea><pre>  x\n  y</pre><p title="a > b">t</p>',
    ]
    for html in pages:
        assert str(content._parse(html, lambda: None)) == str(BeautifulSoup(html, "html.parser"))
    assert content.html_to_markdown(pages[0], "https://example.org/").startswith("# Big")

"""web_search against loopback fakes that speak Brave's, SearXNG's and Tavily's real JSON APIs."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import zuno

from webhelp import Origin, Request, free_port, response

KEY = "sk-SECRETKEY-5d1e9c"
# Its number has six digits: no port number (the fake's, in the HTTP client's debug lines) can contain it.
QUERY = "zebra unicorn 778129"
# What logging itself puts in every record (times, thread and process ids): digits that are noise,
# which once contained the query's number by chance (relativeCreated=...7781...). Every other field
# of a record (message, args, exception text, extras) is searched.
LOG_BOOKKEEPING = frozenset({"created", "msecs", "relativeCreated", "thread", "threadName", "process", "processName"})


def brave_json(q: str) -> bytes:
    return json.dumps(
        {
            "type": "search",
            "query": {"original": q},
            "web": {
                "type": "search",
                "results": [
                    {
                        "title": f"Result about {q}",
                        "url": "https://docs.example.org/page",
                        "description": "A <strong>highlighted</strong> snippet.",
                        "type": "search_result",
                    },
                    {"title": "Blocked one", "url": "https://spam.example.net/x", "description": "spam"},
                    {"title": "Sub", "url": "https://a.docs.example.org/y", "description": "sub"},
                ],
            },
        }
    ).encode()


def searx_json(q: str) -> bytes:
    return json.dumps(
        {
            "query": q,
            "number_of_results": 2,
            "results": [
                {"url": "https://searx.example/1", "title": "First", "content": "first content", "engine": "ddg"},
                {"url": "https://searx.example/2", "title": "Second", "content": "second", "engine": "bing"},
            ],
            "answers": [],
            "suggestions": [],
        }
    ).encode()


class Fake:
    """One loopback server, every provider's route; records what each request carried."""

    def __init__(self) -> None:
        self.origin = Origin()
        self.status = 200
        self.gate: asyncio.Event | None = None
        self.expected = 0
        self.in_flight = 0

    async def __aenter__(self) -> Fake:
        await self.origin.__aenter__()
        self.origin.routes["/res/v1/web/search"] = self.brave
        self.origin.routes["/search"] = self.search
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.origin.__aexit__(*exc)

    async def _wait(self) -> None:
        if self.gate is not None:
            self.in_flight += 1
            if self.in_flight >= self.expected:
                self.gate.set()
            await asyncio.wait_for(self.gate.wait(), 10)

    async def brave(self, req: Request, writer: asyncio.StreamWriter) -> bytes:
        await self._wait()
        if self.status != 200:
            return response(self.status, b'{"type":"ErrorResponse","error":{"code":"x"}}', "application/json")
        if req.header("x-subscription-token") != KEY:
            return response(401, b"{}", "application/json")
        q = parse_qs(urlsplit(req.target).query)["q"][0]
        return response(200, brave_json(q), "application/json")

    async def search(self, req: Request, writer: asyncio.StreamWriter) -> bytes:
        await self._wait()
        if req.method == "POST":  # Tavily
            if req.header("authorization") != f"Bearer {KEY}":
                return response(401, b'{"detail":{"error":"Unauthorized"}}', "application/json")
            body = {
                "query": "q",
                "results": [{"title": "Tav", "url": "https://tavily.example/r", "content": "tc", "score": 0.9}],
            }
            return response(200, json.dumps(body).encode(), "application/json")
        qs = parse_qs(urlsplit(req.target).query)
        if qs.get("format") != ["json"]:
            return response(403, b"Forbidden", "text/html")
        return response(self.status, searx_json(qs["q"][0]), "application/json")

    def base(self) -> str:
        return f"http://127.0.0.1:{self.origin.port}"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_TEST_KEY", KEY)
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


async def run(root: Path, args: dict[str, Any], search: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    async with zuno.Runtime(root=root, config_overrides={"web_search": search}) as rt, rt.session() as s:
        res = await s.step([{"name": "web_search", "arguments": args}])
        return res.results[0].to_json(), rt.store.path


def brave_cfg(fake: Fake, **more: Any) -> dict[str, Any]:
    return {
        "providers": {"brave": {"type": "brave", "base_url": fake.base(), "api_key": "{env:BRAVE_TEST_KEY}"}},
        **more,
    }


async def test_brave_results_are_numbered_with_title_url_and_snippet(workspace: Path) -> None:
    async with Fake() as fake:
        rec, _ = await run(
            workspace, {"queries": ["rust async"]}, brave_cfg(fake, blocked_domains=["spam.example.net"])
        )
        req = fake.origin.requests[0]
    assert rec["outcome"] == "ok", rec["text"]
    assert req.header("x-subscription-token") == KEY and req.header("accept") == "application/json"
    assert parse_qs(urlsplit(req.target).query) == {"q": ["rust async"], "count": ["8"]}
    text = rec["text"]
    assert "1. Result about rust async\n   https://docs.example.org/page\n   A highlighted snippet." in text
    assert "2. Sub\n   https://a.docs.example.org/y" in text
    assert "spam" not in text
    assert rec["declarations"] == {"effect": "ReadOnly", "replay": "Safe", "concurrency": "ParallelSafe"}


async def test_searxng_and_tavily_speak_their_apis(workspace: Path) -> None:
    async with Fake() as fake:
        cfg = {"providers": {"sx": {"type": "searxng", "base_url": fake.base()}}}
        rec, _ = await run(workspace, {"queries": ["q1"], "max_results": 1}, cfg)
        assert rec["outcome"] == "ok" and "1. First\n   https://searx.example/1\n   first content" in rec["text"]
        assert "Second" not in rec["text"]
        cfg = {"providers": {"tv": {"type": "tavily", "base_url": fake.base(), "api_key_env": "BRAVE_TEST_KEY"}}}
        rec, _ = await run(workspace, {"queries": ["q2"]}, cfg)
        assert rec["outcome"] == "ok" and "1. Tav\n   https://tavily.example/r\n   tc" in rec["text"]


async def test_searxng_without_the_json_format_says_how_to_enable_it(workspace: Path) -> None:
    async with Fake() as fake:
        fake.origin.routes["/search"] = response(403, b"Forbidden", "text/html")
        cfg = {"providers": {"sx": {"type": "searxng", "base_url": fake.base()}}}
        rec, _ = await run(workspace, {"queries": ["q1"]}, cfg)
    assert rec["outcome"] == "error" and "HTTP 403" in rec["text"] and "json format" in rec["text"]


async def test_a_batch_runs_in_parallel_and_is_numbered_across_queries(workspace: Path) -> None:
    async with Fake() as fake:
        fake.gate, fake.expected = asyncio.Event(), 3  # no answer until all three are in flight
        rec, _ = await run(
            workspace,
            {"queries": ["one", "two", "three"], "allowed_domains": ["docs.example.org"]},
            brave_cfg(fake),
        )
    assert rec["outcome"] == "ok", rec["text"]
    text = rec["text"]
    assert "## Query 1: one" in text and "## Query 3: three" in text
    assert "1. Result about one" in text and "3. Result about two" in text and "6. Sub" in text
    assert "Blocked one" not in text  # not in allowed_domains
    assert [q["results"] for q in rec["metadata"]["queries"]] == [2, 2, 2]


def _everything_in_the_store(db: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(db)
    try:
        out = []
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            for row in con.execute(f"SELECT * FROM {table}"):
                for col, value in zip(cols, row, strict=True):
                    out.append((table, col, str(value)))
        return out
    finally:
        con.close()


@pytest.mark.parametrize("failure", ["401", "500", "timeout", "dead", "not-json"])
async def test_diagnostics_never_carry_the_key_the_query_or_the_wire_url(
    workspace: Path, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    caplog.set_level(logging.DEBUG)
    async with Fake() as fake:
        cfg = brave_cfg(fake)
        if failure == "401":
            fake.status = 401
        elif failure == "500":
            fake.status = 500
        elif failure == "timeout":
            fake.gate, fake.expected = asyncio.Event(), 99
            cfg["providers"]["brave"]["timeout_ms"] = 300
        elif failure == "dead":
            cfg["providers"]["brave"]["base_url"] = f"http://127.0.0.1:{free_port()}"
        else:
            fake.origin.routes["/res/v1/web/search"] = response(200, b"<html>not json", "text/html")
        rec, db = await run(workspace, {"queries": [QUERY]}, cfg)
    assert rec["outcome"] == "error"
    category = {"401": "auth", "500": "server", "timeout": "timeout", "dead": "connect", "not-json": "bad_response"}
    assert f"failed: {category[failure]}" in rec["text"]
    assert "web_search provider brave (http://127.0.0.1" in rec["text"] and "/res/v1/web/search)" in rec["text"]
    visible = json.dumps(rec)
    logs = caplog.text + "".join(
        str({k: v for k, v in r.__dict__.items() if k not in LOG_BOOKKEEPING}) for r in caplog.records
    )
    for secret in (KEY, QUERY, "zebra", "unicorn", "778129", "q=", "X-Subscription-Token", "count="):
        assert secret not in visible, secret
        assert secret not in logs, secret
    assert any(getattr(r, "web_search", None) for r in caplog.records)  # a log line was written, redacted
    for table, col, value in _everything_in_the_store(db):
        assert KEY not in value, (table, col)
        if (table, col) != ("calls", "arguments"):  # the model's own call is recorded as it was made
            assert "zebra" not in value and "q=" not in value, (table, col, value[:200])
    if failure in ("500", "timeout", "dead"):
        assert any(t == "events" and "call-retry" in v for t, _, v in _everything_in_the_store(db))


async def test_without_a_provider_the_call_is_unavailable_naming_the_config(workspace: Path) -> None:
    rec, _ = await run(workspace, {"queries": ["x"]}, {})
    assert rec["block_kind"] == "unavailable" and "web_search.providers" in rec["text"]
    cfg = {"providers": {"b": {"type": "brave", "api_key": "{env:NOT_SET_ANYWHERE_1}"}}}
    rec, _ = await run(workspace, {"queries": ["x"]}, cfg)
    assert rec["block_kind"] == "unavailable" and "NOT_SET_ANYWHERE_1" in rec["text"]
    rec, _ = await run(workspace, {"queries": []}, cfg)
    assert rec["block_kind"] == "invalid_arguments"


async def test_provider_requests_honour_the_proxy_and_send_it_the_ip(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhelp import ProxyServer

    async with Fake() as fake, ProxyServer("socks5") as proxy:
        monkeypatch.setenv("ALL_PROXY", proxy.url())
        cfg = {"providers": {"sx": {"type": "searxng", "base_url": f"http://localhost:{fake.origin.port}"}}}
        rec, _ = await run(workspace, {"queries": ["via proxy"]}, cfg)
    assert rec["outcome"] == "ok", rec["text"]
    assert proxy.targets == [("127.0.0.1", fake.origin.port)]
    assert fake.origin.requests[0].header("host") == f"localhost:{fake.origin.port}"

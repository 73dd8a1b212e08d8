"""Every web limit in zuno.limits, crossed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits
from zuno.config import ConfigError, load_config

from webhelp import CA, Origin, response


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


async def run(root: Path, calls: list[dict[str, Any]], **cfg: Any) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, config_overrides=cfg or None) as rt, rt.session() as s:
        return [r.to_json() for r in (await s.step(calls)).results]


def test_config_defaults_and_ranges(workspace: Path) -> None:
    cfg = load_config(workspace)
    assert cfg.webfetch.timeout_ms == limits.WEBFETCH_DEFAULT_TIMEOUT_MS == 30_000
    assert cfg.webfetch.max_bytes == limits.WEBFETCH_DEFAULT_MAX_BYTES == 10 * 1024 * 1024
    assert cfg.webfetch.allow_private == []
    assert cfg.web_search.max_results == limits.WEB_SEARCH_DEFAULT_RESULTS
    load_config(workspace, overrides={"webfetch": {"timeout_ms": limits.WEBFETCH_MAX_TIMEOUT_MS}})
    with pytest.raises(ConfigError, match=r"webfetch.timeout_ms = 120001 is out of range: allowed 1..=120000"):
        load_config(workspace, overrides={"webfetch": {"timeout_ms": limits.WEBFETCH_MAX_TIMEOUT_MS + 1}})
    with pytest.raises(ConfigError, match=r"webfetch\.max_bytes"):
        load_config(workspace, overrides={"webfetch": {"max_bytes": limits.WEBFETCH_MAX_BYTES_CEILING + 1}})
    with pytest.raises(ConfigError, match=r"web_search\.max_results"):
        load_config(workspace, overrides={"web_search": {"max_results": limits.WEB_SEARCH_MAX_RESULTS + 1}})
    with pytest.raises(ConfigError, match=r"web_search\.providers\.x\.type"):
        load_config(workspace, overrides={"web_search": {"providers": {"x": {"type": "google"}}}})


async def test_the_configured_body_cap_applies(
    workspace: Path, ca: CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pem = tmp_path / "ca.pem"
    ca.ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    async with Origin(ca.server_context()) as origin:
        origin.routes["/n"] = response(200, b"y" * 2048)
        url = f"https://localhost:{origin.port}/n"
        cfg = {"allow_private": ["localhost"], "max_bytes": 2048}
        [ok] = await run(workspace, [{"name": "webfetch", "arguments": {"url": url}}], webfetch=cfg)
        assert ok["outcome"] == "ok" and ok["metadata"]["bytes"] == 2048
        cfg["max_bytes"] = 2047
        [over] = await run(workspace, [{"name": "webfetch", "arguments": {"url": url}}], webfetch=cfg)
        assert over["outcome"] == "error" and "2047-byte cap (webfetch.max_bytes)" in over["text"]
        assert over["metadata"]["category"] == "too_large"


async def test_reserved_headers_are_refused(workspace: Path) -> None:
    recs = await run(
        workspace,
        [
            {"name": "webfetch", "arguments": {"url": "https://example.com/", "headers": {"Host": "evil"}}},
            {"name": "webfetch", "arguments": {"url": "https://example.com/", "headers": {"X-A": "1\r\nX-B: 2"}}},
        ],
    )
    assert [r["block_kind"] for r in recs] == ["invalid_arguments", "invalid_arguments"]
    assert "Host is set by Zuno" in recs[0]["text"] and "line break" in recs[1]["text"]


async def test_search_batch_and_result_bounds(workspace: Path) -> None:
    cfg = {"providers": {"s": {"type": "searxng", "base_url": "http://127.0.0.1:9"}}}
    too_many = [f"q{i}" for i in range(limits.WEB_SEARCH_MAX_QUERIES + 1)]
    recs = await run(
        workspace,
        [
            {"name": "web_search", "arguments": {"queries": too_many}},
            {"name": "web_search", "arguments": {"queries": ["a"], "max_results": limits.WEB_SEARCH_MAX_RESULTS + 1}},
            {"name": "web_search", "arguments": {"queries": ["  "]}},
        ],
        web_search=cfg,
    )
    assert [r["block_kind"] for r in recs] == ["invalid_arguments"] * 3


async def test_a_provider_answer_over_the_cap_is_refused(workspace: Path) -> None:
    huge = json.dumps({"results": [{"url": "https://x.example/", "title": "t", "content": "c" * 1000}] * 5000}).encode()
    assert len(huge) > limits.WEB_SEARCH_MAX_RESPONSE_BYTES
    async with Origin() as origin:
        origin.routes["/search"] = response(200, huge, "application/json")
        cfg = {"providers": {"s": {"type": "searxng", "base_url": f"http://127.0.0.1:{origin.port}"}}}
        [rec] = await run(workspace, [{"name": "web_search", "arguments": {"queries": ["a"]}}], web_search=cfg)
    assert rec["outcome"] == "error" and "failed: too_large" in rec["text"]

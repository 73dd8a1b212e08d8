"""webfetch / web_fetch through a real Session: the system resolver, the system trust store
(SSL_CERT_FILE names the test CA), allow_private for loopback, permissions on URL patterns."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits
from zuno.tools.web.content import html_to_markdown

from webhelp import CA, Origin, Request, response

HTML = b"""<!doctype html><html><head><title>Docs page</title><style>body{}</style>
<script>alert('x')</script></head><body><nav><a href="/home">Home</a></nav>
<h1>Install</h1><p>Run <code>pip install zuno</code> then read <a href="https://example.com/guide">the guide</a>.</p>
<pre><code>zuno call read '{"path": "x"}'</code></pre><ul><li>one</li><li>two</li></ul>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table></body></html>"""


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA()


@pytest.fixture(autouse=True)
def _trust(ca: CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pem = tmp_path / "ca.pem"
    ca.ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


async def run(root: Path, calls: list[dict[str, Any]], profile: str = "zuno", **cfg: Any) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, profile=profile, config_overrides=cfg or None) as rt, rt.session() as s:
        res = await s.step(calls)
        return [r.to_json() for r in res.results]


def fetch(url: str, name: str = "webfetch", **more: Any) -> dict[str, Any]:
    return {"name": name, "arguments": {"url": url, **more}}


ALLOW = {"webfetch": {"allow_private": ["localhost"]}}


@pytest.mark.parametrize(("profile", "name"), [("zuno", "webfetch"), ("chord", "web_fetch")])
async def test_html_becomes_markdown_through_the_production_path(
    workspace: Path, ca: CA, profile: str, name: str
) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/doc"] = response(200, HTML, "text/html; charset=utf-8")
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/doc", name)], profile, **ALLOW)
    assert rec["outcome"] == "ok", rec["text"]
    text = rec["text"]
    assert "# Install" in text and "`pip install zuno`" in text and "[the guide](https://example.com/guide)" in text
    assert "alert" not in text and "body{}" not in text and "- one" in text
    assert "zuno call read" in text
    assert rec["declarations"] == {"effect": "ReadOnly", "replay": "Safe", "concurrency": "ParallelSafe"}
    meta = rec["metadata"]
    assert meta["allowPrivate"] == [{"host": "localhost", "address": "127.0.0.1", "allowedBy": "localhost"}]
    assert "allow_private let through" in text
    assert meta["status"] == 200 and meta["contentType"] == "text/html"
    assert origin.requests[0].sni == "localhost"


async def test_without_allow_private_loopback_is_a_denied_block(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/")])
        assert origin.connections == 0
    assert rec["outcome"] == "blocked" and rec["block_kind"] == "denied"
    assert "non-public" in rec["text"] and "allow_private" in rec["text"]


async def test_a_refused_url_is_invalid_arguments(workspace: Path) -> None:
    recs = await run(workspace, [fetch("http://user@example.com/"), fetch("http://0x7f.1/"), fetch("ftp://x/")], "zuno")
    assert [r["block_kind"] for r in recs] == ["invalid_arguments"] * 3
    assert "userinfo" in recs[0]["text"] and "127.0.0.1" in recs[1]["text"]


async def test_permission_rules_match_the_canonical_url_in_both_profiles(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/open"] = response(200, b"fine")
        origin.routes["/secret"] = response(200, b"hidden")
        origin.routes["/hop"] = response(302, b"", Location="/secret")
        base = f"https://localhost:{origin.port}"
        for profile, name in (("zuno", "webfetch"), ("chord", "web_fetch")):
            rules = {
                "permission": {"rules": [{"tool": name, "pattern": "https://localhost:*/secret*", "action": "deny"}]}
            }
            recs = await run(
                workspace,
                [
                    fetch(f"{base}/open", name),
                    fetch(f"{base}/secret", name),
                    fetch(f"HTTPS://LOCALHOST:{origin.port}/secret#x", name),  # a spelling cannot dodge the rule
                    fetch(f"{base}/hop", name),  # nor a redirect
                ],
                profile,
                **ALLOW,
                **rules,
            )
            assert recs[0]["outcome"] == "ok"
            assert [r["block_kind"] for r in recs[1:3]] == ["denied", "denied"]
            assert recs[3]["outcome"] == "error" and "denied by permission rule" in recs[3]["text"]
        assert not any(r.target == "/secret" for r in origin.requests)


async def test_timeout_over_the_maximum_is_clamped_with_a_notice(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/"] = response(200, b'{"a": 1}', "application/json")
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/", timeout_ms=500_000)], **ALLOW)
    assert rec["outcome"] == "ok" and rec["text"].rstrip().endswith('{"a": 1}')
    assert f"clamped to {limits.WEBFETCH_MAX_TIMEOUT_MS}" in rec["text"]
    assert rec["metadata"]["notices"]


async def test_a_transient_failure_is_retried_by_the_runtime(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/busy"] = response(503, b"busy")
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/busy")], **ALLOW)
        assert len(origin.requests) == limits.SAFE_RETRY_ATTEMPTS
    assert rec["outcome"] == "error" and f"failed {limits.SAFE_RETRY_ATTEMPTS} times" in rec["text"]
    assert "HTTP 503" in rec["text"]


async def test_a_permanent_failure_is_not_retried(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/nope")], **ALLOW)
        assert len(origin.requests) == 1
    assert rec["outcome"] == "error" and rec["metadata"]["status"] == 404


async def test_big_text_goes_through_the_ordinary_output_limits(workspace: Path, ca: CA) -> None:
    body = ("line of text\n" * 20_000).encode()
    async with Origin(ca.server_context()) as origin:
        origin.routes["/big"] = response(200, body)
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/big")], **ALLOW)
    assert rec["outcome"] == "ok"
    assert "withheldOutput" in rec["metadata"], rec["text"][:500]


async def test_charsets_declared_and_sniffed(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/l1"] = response(200, "café".encode("latin-1"), "text/plain; charset=iso-8859-1")
        origin.routes["/meta"] = response(
            200,
            '<html><head><meta charset="windows-1251"></head><body><p>Привет</p></body></html>'.encode("cp1251"),
            "text/html",
        )
        recs = await run(
            workspace,
            [fetch(f"https://localhost:{origin.port}/l1"), fetch(f"https://localhost:{origin.port}/meta")],
            **ALLOW,
        )
    # ISO-8859-1 is read as Windows-1252, its superset on the web (the WHATWG Encoding Standard).
    assert recs[0]["text"].rstrip().endswith("café") and recs[0]["metadata"]["charset"] == "cp1252"
    assert "Привет" in recs[1]["text"] and recs[1]["metadata"]["charset"] == "cp1251"


async def test_parallel_fetches_overlap(workspace: Path, ca: CA) -> None:
    gate = asyncio.Event()
    seen = 0

    async def wait_for_all(req: Request, writer: asyncio.StreamWriter) -> bytes:
        nonlocal seen
        seen += 1
        if seen == 4:
            gate.set()
        await asyncio.wait_for(gate.wait(), 10)
        return response(200, b"together")

    async with Origin(ca.server_context()) as origin:
        origin.routes["/w"] = wait_for_all
        recs = await run(workspace, [fetch(f"https://localhost:{origin.port}/w?{i}") for i in range(4)], **ALLOW)
    assert all(r["outcome"] == "ok" for r in recs), [r["text"] for r in recs]


def test_surface_per_profile() -> None:
    from zuno.config import Config
    from zuno.surface import build_surface

    zuno_tools = build_surface(Config(), Path("."), profile="zuno").tools
    chord_tools = build_surface(Config(), Path("."), profile="chord").tools
    assert "webfetch" in zuno_tools and "web_search" in zuno_tools and "web_fetch" not in zuno_tools
    assert "web_fetch" in chord_tools and "webfetch" not in chord_tools and "web_search" not in chord_tools


def test_markdown_conversion_keeps_code_and_tables_and_resolves_links() -> None:
    md = html_to_markdown(HTML.decode(), "https://docs.test/a/b")
    assert md.startswith("# Docs page\n")
    assert "[Home](https://docs.test/home)" in md
    assert "| k | v |\n| --- | --- |\n| a | 1 |" in md
    assert '```\nzuno call read \'{"path": "x"}\'\n```' in md


async def test_format_raw_returns_the_decoded_body_unconverted(workspace: Path, ca: CA) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/doc"] = response(200, HTML, "text/html; charset=utf-8")
        [rec] = await run(workspace, [fetch(f"https://localhost:{origin.port}/doc", format="raw")], **ALLOW)
    assert rec["outcome"] == "ok" and "<h1>Install</h1>" in rec["text"] and "converted" not in rec["text"]


async def test_the_cli_fetches_through_the_same_path(workspace: Path, ca: CA, tmp_path: Path) -> None:
    import json
    import sys

    from conftest import zuno_env

    pem = tmp_path / "cli-ca.pem"
    ca.ca.cert_pem.write_to_path(str(pem))
    async with Origin(ca.server_context()) as origin:
        origin.routes["/j"] = response(200, b'{"k": 1}', "application/json")
        env = zuno_env(
            {
                "SSL_CERT_FILE": str(pem),
                "ZUNO_CONFIG_CONTENT": json.dumps({"webfetch": {"allow_private": ["localhost"]}}),
            }
        )
        args = json.dumps({"url": f"https://localhost:{origin.port}/j"})
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "zuno",
            "call",
            "webfetch",
            args,
            "--json",
            cwd=workspace,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    rec = json.loads(out)
    assert rec["outcome"] == "ok", err.decode()
    assert rec["text"].rstrip().endswith('{"k": 1}') and rec["metadata"]["allowPrivate"]

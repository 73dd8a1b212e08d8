"""A web_search endpoint's diagnostics name its port: two local endpoints (a SearXNG on 8080 and
one on 8888) differ by nothing else, and a message without it pointed at the wrong one."""

from __future__ import annotations

from pathlib import Path

import zuno

from webhelp import free_port


async def _search(root: Path, base_url: str) -> dict[str, object]:
    search = {"providers": {"sx": {"type": "searxng", "base_url": base_url}}}
    async with zuno.Runtime(root=root, config_overrides={"web_search": search}) as rt, rt.session() as s:
        res = await s.step([{"name": "web_search", "arguments": {"queries": ["q"]}}])
        return res.results[0].to_json()


async def test_a_failed_endpoint_is_named_with_its_port(workspace: Path) -> None:
    port = free_port()  # nothing listens there: the connect fails
    rec = await _search(workspace, f"http://127.0.0.1:{port}")
    assert rec["outcome"] == "error", rec
    assert f"web_search provider sx (http://127.0.0.1:{port}/search)" in str(rec["text"]), rec["text"]


async def test_an_ipv6_endpoint_is_bracketed_before_its_port(workspace: Path) -> None:
    port = free_port()
    rec = await _search(workspace, f"http://[::1]:{port}")
    assert f"(http://[::1]:{port}/search)" in str(rec["text"]), rec["text"]


async def test_a_port_out_of_range_is_refused_naming_the_setting(workspace: Path) -> None:
    rec = await _search(workspace, "http://127.0.0.1:99999")
    assert rec["block_kind"] == "unavailable", rec
    assert "web_search.providers.sx.base_url" in str(rec["text"]) and "port" in str(rec["text"]), rec["text"]

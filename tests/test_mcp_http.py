"""``zuno mcp --http``: loopback, a bearer token, DNS-rebinding protection, one session per client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from conftest import zuno_env
from mcp_peers import MODES, HttpZuno


@pytest.mark.parametrize("mode", MODES)
async def test_http_client_lists_and_calls_and_two_clients_never_share_a_session(workspace: Path, mode: str) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    extra = ("--token", "tok-one", "--token", "tok-two")
    async with HttpZuno(workspace, *extra) as z:
        async with z.client(mode, "tok-one") as one, z.client(mode, "tok-two") as two:
            assert "read" in {t.name for t in (await one.list_tools()).tools}
            r1 = await one.call_tool("read", {"path": "a.txt"})
            r2 = await two.call_tool("read", {"path": "a.txt"})
            again = await one.call_tool("read", {"path": "a.txt"})
    assert not r1.is_error and "alpha" in r1.content[0].text
    assert r1.structured_content["session"] != r2.structured_content["session"]
    assert again.structured_content["session"] == r1.structured_content["session"]


async def test_a_generated_token_is_printed_once_and_required(workspace: Path) -> None:
    async with HttpZuno(workspace) as z:
        assert z.token and z.stderr.count(z.token.encode()) == 1
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        async with httpx2.AsyncClient() as h:
            none = await h.post(z.url, json=body)
            wrong = await h.post(z.url, json=body, headers={"Authorization": "Bearer nope"})
            rebound = await h.post(
                z.url,
                json=body,
                headers={
                    "Authorization": f"Bearer {z.token}",
                    "Host": "evil.example:80",
                    "Accept": "application/json, text/event-stream",
                },
            )
    assert none.status_code == 401 and wrong.status_code == 401
    assert rebound.status_code in (400, 403, 421)


def test_a_non_loopback_address_is_refused_without_allow_remote(workspace: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "zuno", "mcp", "--root", str(workspace), "--http", "0.0.0.0:8765"],
        env=zuno_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "loopback" in p.stderr and "--allow-remote" in p.stderr

"""webfetch cases that would send traffic off the machine if the code under test were wrong.

Not collected by itself: ``test_web_netns.py`` runs this file inside a fresh network namespace
with only loopback up (``unshare -n``), so a wrong fallback or a second lookup cannot leave it.
"""

from __future__ import annotations

import os

import pytest

from zuno.tools.web.engine import Fetcher
from zuno.tools.web.errors import AddressRefused, ConnectFailed, ProxyFailed

from webhelp import CA, Origin, ProxyServer, TableResolver, free_port, response

pytestmark = pytest.mark.skipif(os.environ.get("ZUNO_WEB_NETNS") != "1", reason="runs inside unshare -n only")
LOOP = ["127.0.0.0/8", "::1"]


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA()


@pytest.mark.parametrize(
    "proxy_url",
    [
        "http://127.0.0.1:{dead}",
        "socks5://127.0.0.1:{dead}",
        "socks4://127.0.0.1:{dead}",
        "https://proxy.test:{dead}",
        "socks5h://203.0.113.9:1080",  # unreachable: the namespace has no route off loopback
        "http://nowhere.test:3128",  # does not resolve
    ],
)
async def test_a_dead_proxy_never_falls_back_to_direct(ca: CA, proxy_url: str) -> None:
    async with Origin(ca.server_context()) as origin:
        origin.routes["/"] = response(200, b"direct would have worked")
        url = proxy_url.format(dead=free_port())
        f = Fetcher(
            resolver=TableResolver({"a.test": ["127.0.0.1"], "proxy.test": ["127.0.0.1"]}),
            environ={"HTTPS_PROXY": url},
            ssl_context=ca.client_context(),
        )
        with pytest.raises(ProxyFailed, match="not falling back to a direct connection"):
            await f.fetch(f"https://a.test:{origin.port}/", allow_private=LOOP)
        assert origin.connections == 0


async def test_a_proxy_that_refuses_the_target_does_not_fall_back(ca: CA) -> None:
    async with Origin() as origin, ProxyServer("http") as proxy:
        origin.routes["/"] = response(200, b"direct")
        f = Fetcher(
            resolver=TableResolver({"a.test": ["127.0.0.1"]}),
            environ={"http_proxy": proxy.url()},
        )
        dead = free_port()
        with pytest.raises(ProxyFailed):
            await f.fetch(f"http://a.test:{dead}/", allow_private=LOOP)
        assert proxy.targets == [("127.0.0.1", dead)] and origin.connections == 0


async def test_public_first_then_loopback_is_dialled_once_at_the_public_address(ca: CA) -> None:
    async with Origin() as origin:
        origin.routes["/"] = response(200, b"rebound")
        resolver = TableResolver({"a.test": [["93.184.215.14"], ["127.0.0.1"]]})
        f = Fetcher(resolver=resolver, environ={})
        with pytest.raises(ConnectFailed) as e:
            await f.fetch(f"http://a.test:{origin.port}/")
        assert "93.184.215.14" in e.value.message
        assert resolver.calls == ["a.test"]
        assert origin.connections == 0


async def test_a_mixed_answer_is_refused_before_any_connection() -> None:
    async with Origin() as origin:
        f = Fetcher(resolver=TableResolver({"a.test": ["93.184.215.14", "127.0.0.1"]}), environ={})
        with pytest.raises(AddressRefused, match="mix of public and non-public"):
            await f.fetch(f"http://a.test:{origin.port}/")
        assert origin.connections == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:{port}/",
        "http://127.0.0.1:{port}/",
        "http://[::1]:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "http://[::ffff:7f00:1]:{port}/",
        "http://[64:ff9b::7f00:1]:{port}/",
        "http://[2002:7f00:1::]:{port}/",
        "http://localhost.:{port}/",
    ],
)
async def test_the_system_resolver_path_refuses_loopback(url: str) -> None:
    async with Origin() as origin:
        f = Fetcher(environ={})  # the real resolver (/etc/hosts answers localhost)
        with pytest.raises(AddressRefused):
            await f.fetch(url.format(port=origin.port))
        assert origin.connections == 0

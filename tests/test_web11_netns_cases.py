"""webfetch cases (eleventh round) that would send traffic off the machine if the code under test
were wrong: a refusal that failed would dial a private or outside address, a proxy fallback would go
direct.

Skipped when collected by itself: ``test_web11_netns.py`` runs this file inside a fresh network
namespace with only loopback up (``unshare -n``), so a wrong fallback or a missed refusal cannot
leave it.
"""

from __future__ import annotations

import os

import pytest

from zuno.tools.web.engine import Fetcher
from zuno.tools.web.errors import AddressRefused, RedirectRefused

from webhelp import Origin, ProxyServer, TableResolver

pytestmark = pytest.mark.skipif(os.environ.get("ZUNO_WEB11_NETNS") != "1", reason="runs inside unshare -n only")


def moved(location: bytes, status: int = 302) -> bytes:
    return b"HTTP/1.1 %d Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % (status, location)


async def test_a_spaced_location_to_a_private_address_is_refused() -> None:
    async with Origin() as origin:
        origin.routes["/priv"] = moved(b"http://10.0.0.1/a b")
        origin.routes["/name"] = moved(b"http://inside.test/a b?x= y")
        origin.routes["/v6"] = moved(b"http://[::ffff:10.0.0.1]/a b")
        f = Fetcher(resolver=TableResolver({"a.test": ["127.0.0.1"], "inside.test": ["192.168.1.5"]}), environ={})
        for path, why in [
            ("/priv", "10.0.0.1 is in 10.0.0.0/8"),
            ("/name", "192.168.1.5 is in 192.168.0.0/16"),
            ("/v6", "IPv4-mapped for 10.0.0.1"),
        ]:
            with pytest.raises(RedirectRefused) as e:
                await f.fetch(f"http://a.test:{origin.port}{path}", allow_private=["a.test"])
            assert why in e.value.message, (path, e.value.message)
        assert origin.connections == 3


@pytest.mark.parametrize("kind", ["http", "socks5", "socks4"])
async def test_a_private_target_behind_a_proxy_is_refused_before_the_proxy_is_asked(kind: str) -> None:
    """A proxy from the environment changes the route, never the check: the target is resolved and
    validated locally first, so a private address (literal, by name, mapped, or reached by a
    redirect) is refused and the proxy is never asked for it. Held in this round (no change)."""
    async with Origin() as origin, ProxyServer(kind) as proxy:
        origin.routes["/to-private"] = moved(b"http://10.0.0.1/x")
        origin.routes["/to-metadata"] = moved(b"http://169.254.169.254/latest/meta-data/")
        env = {"HTTP_PROXY": proxy.url(), "NO_PROXY": "pub.test"}
        resolver = TableResolver(
            {"inside.test": ["10.9.9.9"], "pub.test": ["127.0.0.1"], "mixed.test": ["93.184.215.14", "192.168.0.1"]}
        )
        f = Fetcher(resolver=resolver, environ=env)
        for url in ("http://10.0.0.1/", "http://inside.test/", "http://[::ffff:10.0.0.1]/", "http://mixed.test/"):
            with pytest.raises(AddressRefused):
                await f.fetch(url)
        for path in ("/to-private", "/to-metadata"):
            with pytest.raises(RedirectRefused, match="is refused at its last hop"):
                await f.fetch(f"http://pub.test:{origin.port}{path}", allow_private=["pub.test"])
        assert proxy.targets == []

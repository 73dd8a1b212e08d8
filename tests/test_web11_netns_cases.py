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
from zuno.tools.web.errors import RedirectRefused

from webhelp import Origin, TableResolver

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

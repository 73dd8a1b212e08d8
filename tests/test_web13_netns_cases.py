"""Cases that run only inside test_web13_netns.py's namespaces (loopback only, private names in
/etc/hosts): were a refusal wrong, the connection could go nowhere but loopback. What held in the
thirteenth round's outside testing, kept as regression tests."""

from __future__ import annotations

import os

import pytest

from zuno.tools.web.engine import Fetcher
from zuno.tools.web.errors import AddressRefused, UrlRefused

pytestmark = pytest.mark.skipif(os.environ.get("ZUNO_WEB13_NETNS") != "1", reason="runs inside unshare -n only")


@pytest.mark.parametrize(
    "host",
    ["w13-loop.test", "w13-private.test", "w13-metadata.test", "W13-PRIVATE.test.", "localhost"],
)
async def test_a_name_the_system_resolves_to_a_private_address_is_refused(host: str) -> None:
    with pytest.raises(AddressRefused, match="non-public"):
        await Fetcher().fetch(f"http://{host}:9/", timeout_s=5)


@pytest.mark.parametrize(
    "url",
    [
        "http://[::ffff:127.0.0.1]:9/",
        "http://[::ffff:a00:1]:9/",
        "http://[::]:9/",
        "http://0.0.0.0:9/",
        "http://169.254.169.254/",
        "http://[fe80::1]:9/",
        "http://[64:ff9b::a00:1]/",
        "http://[2002:a00:1::]/",
        "http://[::10.0.0.1]/",
        "http://\uff11\uff10\uff0e0\uff0e0\uff0e1/",  # fullwidth digits and dots: 10.0.0.1
    ],
)
async def test_private_addresses_in_every_spelling_are_refused(url: str) -> None:
    with pytest.raises(AddressRefused):
        await Fetcher().fetch(url, timeout_s=5)


@pytest.mark.parametrize(
    "url",
    ["http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/", "http://0/", "http://10.0.0.1./"],
)
async def test_non_canonical_numeric_hosts_are_refused_unparsed(url: str) -> None:
    with pytest.raises(UrlRefused, match="non-canonical numeric"):
        await Fetcher().fetch(url, timeout_s=5)

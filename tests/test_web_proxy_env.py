"""Proxy selection from the environment: lowercase wins, ALL_PROXY falls back, NO_PROXY matching."""

from __future__ import annotations

import pytest

from zuno.tools.web.errors import ProxyFailed
from zuno.tools.web.proxy_env import parse_proxy, proxy_for
from zuno.tools.web.urls import parse_target

NO_PROXY_CASES = [
    # (NO_PROXY, url, bypassed?)
    ("*", "https://anything.example/", True),
    ("example.com", "https://example.com/", True),
    ("example.com", "https://www.example.com/", True),
    ("example.com", "https://notexample.com/", False),
    (".example.com", "https://example.com/", True),
    (".example.com", "https://a.b.example.com/", True),
    ("*.example.com", "https://a.example.com/", True),
    ("EXAMPLE.com.", "https://example.com/", True),
    ("example.com:8080", "https://example.com:8080/", True),
    ("example.com:8080", "https://example.com/", False),
    ("10.0.0.0/8", "http://10.1.2.3/", True),
    ("10.0.0.0/8", "http://11.1.2.3/", False),
    ("10.0.0.0/8", "http://ten.example/", False),  # CIDRs match literal addresses, not names
    ("192.168.1.5", "http://192.168.1.5:81/", True),
    ("192.168.1.5:80", "http://192.168.1.5:81/", False),
    ("::1", "http://[::1]/", True),
    ("[::1]:8080", "http://[::1]:8080/", True),
    ("[::1]:8080", "http://[::1]:8081/", False),
    ("fd00::/8", "http://[fd12::1]/", True),
    ("a.test, b.test  c.test", "http://c.test/", True),
    ("a.test,,", "http://b.test/", False),
    ("", "http://a.test/", False),
]


@pytest.mark.parametrize(("no_proxy", "url", "bypassed"), NO_PROXY_CASES)
def test_no_proxy_matching(no_proxy: str, url: str, bypassed: bool) -> None:
    env = {"ALL_PROXY": "socks5://127.0.0.1:1080", "NO_PROXY": no_proxy}
    assert (proxy_for(parse_target(url), env) is None) is bypassed


def test_lowercase_wins_and_all_proxy_falls_back() -> None:
    t = parse_target("https://a.test/")
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2", "ALL_PROXY": "socks5://all:3"}
    p = proxy_for(t, env)
    assert p is not None and (p.host, p.port, p.source) == ("lower", 2, "https_proxy")
    p = proxy_for(t, {"ALL_PROXY": "socks5://all:3"})
    assert p is not None and p.kind == "socks5"
    assert proxy_for(parse_target("http://a.test/"), {"https_proxy": "http://x:1"}) is None
    p = proxy_for(parse_target("http://a.test/"), {"http_proxy": "x:1"})
    assert p is not None and p.scheme == "http"
    assert proxy_for(t, {"no_proxy": "a.test", "NO_PROXY": "", "https_proxy": "http://x:1"}) is None
    # an empty lowercase variable does not hide the uppercase one
    p = proxy_for(t, {"https_proxy": "", "HTTPS_PROXY": "http://up:9"})
    assert p is not None and p.host == "up"


def test_proxy_urls_and_credentials_kept_out_of_text() -> None:
    p = parse_proxy("socks5h://us%40er:s3cr%3At@proxy.example:1081", "ALL_PROXY")
    assert (p.username, p.password, p.kind, p.port) == ("us@er", "s3cr:t", "socks5", 1081)
    assert "s3cr" not in str(p) and "s3cr" not in repr(p) and "us" not in str(p).split("proxy")[0]
    assert str(p) == "socks5h proxy proxy.example:1081"
    assert parse_proxy("https://p.example", "x").port == 443
    assert parse_proxy("socks4a://p.example", "x").kind == "socks4"
    assert str(parse_proxy("http://[::1]:3128", "x")) == "http proxy [::1]:3128"
    with pytest.raises(ProxyFailed, match="scheme 'ftp'"):
        parse_proxy("ftp://p:1", "HTTP_PROXY")
    with pytest.raises(ProxyFailed) as e:
        parse_proxy("http://user:hunter2@p:99999", "HTTP_PROXY")
    assert "hunter2" not in e.value.message

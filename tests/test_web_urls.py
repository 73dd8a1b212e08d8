"""The one URL parser: every refused spelling, and what an accepted URL becomes."""

from __future__ import annotations

import ipaddress

import pytest

from zuno.tools.web.errors import UrlRefused
from zuno.tools.web.urls import parse_target

# (url, a fragment the refusal must contain)
REFUSED = [
    # schemes
    ("ftp://example.com/", "scheme 'ftp'"),
    ("file:///etc/passwd", "scheme 'file'"),
    ("javascript:alert(1)", "scheme 'javascript'"),
    ("gopher://example.com/", "scheme"),
    ("example.com/path", "no scheme"),
    # a host and port with no scheme is not the scheme "localhost"
    ("localhost:8080", "no scheme. Write http://localhost:8080 or https://localhost:8080."),
    ("example.com:443/x?y", "no scheme. Write http://example.com:443/x?y or"),
    ("mailto:a@example.com", "the scheme 'mailto' is not http or https"),
    ("http:example.com", "followed by '//'"),
    ("http:/example.com", "followed by '//'"),
    ("http:///example.com", "followed by '//'"),
    # userinfo, every spelling
    ("http://user@example.com/", "userinfo"),
    ("http://user:pass@example.com/", "userinfo"),
    ("http://@example.com/", "userinfo"),
    ("http://:@example.com/", "userinfo"),
    ("http://a%40b@example.com/", "userinfo"),
    ("http://example.com@127.0.0.1/", "userinfo"),
    ("http://127.0.0.1:80@example.com/", "userinfo"),
    ("https://user@[::1]/", "userinfo"),
    # backslash tricks (WHATWG reads \ as /, RFC 3986 parsers do not)
    ("http://example.com\\@127.0.0.1/", "backslash"),
    ("http://127.0.0.1\\.example.com/", "backslash"),
    ("http:\\\\example.com/", "backslash"),
    ("http://example.com/a\\b", "backslash"),
    # control characters, NUL, whitespace
    ("http://example.com\x00.evil/", "U+0000"),
    ("http://exa\tmple.com/", "U+0009"),
    ("http://example.com/\npath", "U+000A"),
    ("http://example.com\r/", "U+000D"),
    ("http://example.com/\x7f", "U+007F"),
    ("http://example.com/\x85", "U+0085"),
    ("http://exa mple.com/", "whitespace"),
    ("http://example.com/a b", "whitespace"),
    ("http://example.com/\u00a0", "whitespace"),
    ("http://example.com/\ud800", "lone surrogate"),
    ("http://exa\udcffmple.com/", "lone surrogate"),
    # numeric hosts that are not canonical dotted quads
    ("http://2130706433/", "127.0.0.1"),
    ("http://0x7f.1/", "127.0.0.1"),
    ("http://0x7f000001/", "127.0.0.1"),
    ("http://0177.0.0.1/", "127.0.0.1"),
    ("http://127.1/", "127.0.0.1"),
    ("http://127.0.1/", "127.0.0.1"),
    ("http://0/", "0.0.0.0"),
    ("http://0x7f.0.0.1/", "127.0.0.1"),
    ("http://0177.0x0.0.01/", "127.0.0.1"),
    ("http://127.000.000.001/", "127.0.0.1"),
    ("http://127.0.0.1./", "127.0.0.1"),
    ("http://1.2.3.4.5/", "non-canonical numeric"),
    ("http://256.1.1.1/", "non-canonical numeric"),
    ("http://example.0x10/", "non-canonical numeric"),
    ("http://example.123/", "non-canonical numeric"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11./", "127.0.0.1"),  # fullwidth digits, trailing dot
    ("http://\uff10\uff58\uff17\uff46.1/", "127.0.0.1"),  # fullwidth 0x7f.1
    # hosts
    ("http:///", "followed by '//'"),
    ("http://:80/", "no host"),
    ("http://%31%32%37.0.0.1/", "percent escape"),
    ("http://[fe80::1%25eth0]/", "zone id"),
    ("http://[fe80::1%eth0]/", "zone id"),
    ("http://[::1/", "missing its ']'"),
    ("http://[::g]/", "not an IPv6 address"),
    ("http://[::1]x/", "after the IPv6 literal"),
    ("http://exa_mple.com/", "IDNA"),
    ("http://xn--a.com/", "IDNA"),
    ("http://a..b/", "empty label"),
    ("http://\u2488example.com/", "IDNA"),  # ⒈ is disallowed under STD3 rules
    ("http://-example.com/", "IDNA"),
    # ports
    ("http://example.com:0/", "out of range"),
    ("http://example.com:65536/", "out of range"),
    ("http://example.com:8o/", "not a number"),
    ("http://example.com:/", "not a number"),
    ("http://example.com:-1/", "not a number"),
    ("", "empty"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_refused(url: str, why: str) -> None:
    with pytest.raises(UrlRefused) as e:
        parse_target(url)
    assert why in e.value.message, e.value.message


ACCEPTED = [
    # (url, scheme, host, port, path, ip?)
    ("http://example.com", "http", "example.com", 80, "/", None),
    ("HTTPS://Example.COM/A?b=C#frag", "https", "example.com", 443, "/A?b=C", None),
    ("https://example.com:8443/x", "https", "example.com", 8443, "/x", None),
    ("http://example.com.:80/", "http", "example.com", 80, "/", None),
    ("http://example.com?q=1", "http", "example.com", 80, "/?q=1", None),
    ("https://bücher.example/ä", "https", "xn--bcher-kva.example", 443, "/%C3%A4", None),
    ("https://faß.de/", "https", "xn--fa-hia.de", 443, "/", None),  # IDNA 2008, not transitional
    ("https://ＥＸＡＭＰＬＥ．com/", "https", "example.com", 443, "/", None),  # UTS 46 mapping
    ("http://127.0.0.1:8080/", "http", "127.0.0.1", 8080, "/", "127.0.0.1"),
    ("http://0.0.0.0/", "http", "0.0.0.0", 80, "/", "0.0.0.0"),
    ("http://[::1]:9/", "http", "::1", 9, "/", "::1"),
    ("http://[0:0:0:0:0:ffff:7f00:1]/", "http", "::ffff:7f00:1", 80, "/", "::ffff:7f00:1"),
    ("http://[::ffff:127.0.0.1]/", "http", "::ffff:7f00:1", 80, "/", "::ffff:7f00:1"),
    # %2e%2e is ".." to a server: normalised away (ninth round), so a rule sees the path served.
    ("http://example.com/%2e%2e/%5C", "http", "example.com", 80, "/%5C", None),
    ("http://example.com:080/", "http", "example.com", 80, "/", None),
]


@pytest.mark.parametrize(("url", "scheme", "host", "port", "path", "ip"), ACCEPTED)
def test_accepted(url: str, scheme: str, host: str, port: int, path: str, ip: str | None) -> None:
    t = parse_target(url)
    assert (t.scheme, t.host, t.port, t.path) == (scheme, host, port, path)
    assert t.ip == (ipaddress.ip_address(ip) if ip else None)


def test_authority_and_origin_come_from_the_parsed_fields() -> None:
    t = parse_target("https://[::1]:8443/x?y")
    assert t.authority == "[::1]:8443"
    assert t.url == "https://[::1]:8443/x?y"
    assert parse_target("http://a.test:80/").authority == "a.test"
    assert parse_target("http://a.test/").same_origin(parse_target("http://A.test:80/b"))
    assert not parse_target("http://a.test/").same_origin(parse_target("https://a.test/"))


# Property: what the parser accepts, a resolver cannot read as a different host.
_HOSTISH = "0123456789abcdefxX.:[]@%\\/-_é１．"


def _host_strategy():
    from hypothesis import strategies as st

    return st.text(alphabet=_HOSTISH, min_size=1, max_size=20)


@pytest.mark.parametrize("host", ["0..", "1..", "a..b", ".a", "0..0"])
def test_a_host_with_an_empty_label_is_refused(host: str) -> None:
    # Found by the property below: "0.." was accepted as the host "0.", a numeric spelling.
    with pytest.raises(UrlRefused):
        parse_target(f"http://{host}/p")


def test_no_accepted_hostname_is_a_numeric_address_to_inet_aton() -> None:
    import socket

    from hypothesis import given, settings

    @settings(max_examples=600, deadline=None)
    @given(_host_strategy())
    def check(host: str) -> None:
        try:
            t = parse_target(f"http://{host}/p")
        except UrlRefused:
            return
        assert t.host.isascii() and "@" not in t.host and "\\" not in t.host and "%" not in t.host
        if t.ip is None:
            try:
                socket.inet_aton(t.host)
            except OSError:
                pass
            else:
                raise AssertionError(f"{host!r} became {t.host!r}, which inet_aton reads as an address")
        again = parse_target(t.url)
        assert (again.scheme, again.host, again.port, again.path) == (t.scheme, t.host, t.port, t.path)

    check()

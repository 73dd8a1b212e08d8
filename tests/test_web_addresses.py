"""The explicit address table: first, last and just-outside of every blocked range; every
embedding unwrapped; a mixed answer refused whole; an empty answer an error; allow_private."""

from __future__ import annotations

import ipaddress

import pytest

from zuno.tools.web.addresses import IPV4_TABLE, IPV6_TABLE, embedded, parse_networks, refusal
from zuno.tools.web.errors import AddressRefused, ResolveError
from zuno.tools.web.resolver import validate_answer

BLOCKED = [r for r in (*IPV4_TABLE, *IPV6_TABLE) if not r.reachable]


@pytest.mark.parametrize("entry", BLOCKED, ids=lambda r: str(r.network))
def test_first_and_last_of_every_blocked_range_are_refused(entry) -> None:
    for ip in (entry.network.network_address, entry.network.broadcast_address):
        assert refusal(ip) is not None, ip


# (address, refused?, a fragment of the reason) — the just-outside neighbours, by hand.
EDGES = [
    ("1.0.0.0", False, ""),
    ("9.255.255.255", False, ""),
    ("10.0.0.0", True, "Private-Use"),
    ("10.255.255.255", True, "Private-Use"),
    ("11.0.0.0", False, ""),
    ("100.63.255.255", False, ""),
    ("100.64.0.0", True, "Shared Address Space"),
    ("100.127.255.255", True, "Shared Address Space"),
    ("100.128.0.0", False, ""),
    ("126.255.255.255", False, ""),
    ("127.0.0.1", True, "Loopback"),
    ("128.0.0.0", False, ""),
    ("169.253.255.255", False, ""),
    ("169.254.169.254", True, "Link Local"),
    ("169.255.0.0", False, ""),
    ("172.15.255.255", False, ""),
    ("172.16.0.0", True, "Private-Use"),
    ("172.31.255.255", True, "Private-Use"),
    ("172.32.0.0", False, ""),
    ("191.255.255.255", False, ""),
    ("192.0.0.8", True, "dummy"),
    ("192.0.0.9", False, ""),
    ("192.0.0.10", False, ""),
    ("192.0.0.11", True, "IETF Protocol Assignments"),
    ("192.0.0.170", True, "NAT64/DNS64"),
    ("192.0.1.0", False, ""),
    ("192.0.1.255", False, ""),
    ("192.0.2.0", True, "TEST-NET-1"),
    ("192.0.3.0", False, ""),
    ("192.31.196.1", False, ""),
    ("192.88.98.255", False, ""),
    ("192.88.99.1", True, "6to4 Relay"),
    ("192.88.100.0", False, ""),
    ("192.167.255.255", False, ""),
    ("192.168.1.1", True, "Private-Use"),
    ("192.169.0.0", False, ""),
    ("198.17.255.255", False, ""),
    ("198.18.0.0", True, "Benchmarking"),
    ("198.19.255.255", True, "Benchmarking"),
    ("198.20.0.0", False, ""),
    ("198.51.99.255", False, ""),
    ("198.51.101.0", False, ""),
    ("203.0.112.255", False, ""),
    ("203.0.113.7", True, "TEST-NET-3"),
    ("203.0.114.0", False, ""),
    ("223.255.255.255", False, ""),
    ("224.0.0.1", True, "Multicast"),
    ("239.255.255.255", True, "Multicast"),
    ("240.0.0.0", True, "Reserved"),
    ("255.255.255.255", True, "Limited Broadcast"),
    ("8.8.8.8", False, ""),
    # IPv6
    ("::", True, "Unspecified"),
    ("::1", True, "Loopback"),
    ("::2", True, "IPv4-compatible"),
    ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True, "outside 2000::/3"),
    ("2000::", False, ""),
    ("2001:1ff:ffff:ffff::", True, "IETF Protocol Assignments"),
    ("2001:200::", False, ""),
    ("2001:1::1", False, ""),
    ("2001:1::4", True, "IETF Protocol Assignments"),
    ("2001:2::", True, "Benchmarking"),
    ("2001:3::1", False, ""),
    ("2001:10::1", True, "ORCHID"),
    ("2001:20::1", False, ""),
    ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", False, ""),
    ("2001:db8::", True, "Documentation"),
    ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", True, "Documentation"),
    ("2001:db9::", False, ""),
    ("2003::", False, ""),
    ("3ffe:ffff::", False, ""),
    ("3fff::", True, "Documentation"),
    ("3fff:fff:ffff::", True, "Documentation"),
    ("3fff:1000::", False, ""),
    ("5f00::1", True, "SRv6"),
    ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True, "outside 2000::/3"),
    ("fc00::", True, "Unique-Local"),
    ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True, "Unique-Local"),
    ("fe80::1", True, "Link-Local"),
    ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True, "Link-Local"),
    ("fec0::1", True, "Site-Local"),
    ("ff02::1", True, "Multicast"),
    ("100::1", True, "Discard-Only"),
    ("100:0:0:1::1", True, "Dummy"),
    ("2606:4700:4700::1111", False, ""),
]


@pytest.mark.parametrize(("addr", "refused", "why"), EDGES)
def test_edges(addr: str, refused: bool, why: str) -> None:
    reason = refusal(ipaddress.ip_address(addr))
    assert (reason is not None) is refused, reason
    if refused:
        assert why in reason, reason


# (address, refused?, the embedded IPv4 address it carries or None, a fragment of the reason)
EMBEDDINGS = [
    ("::ffff:127.0.0.1", True, "127.0.0.1", "Loopback"),
    ("::ffff:10.1.2.3", True, "10.1.2.3", "Private-Use"),
    ("::ffff:8.8.8.8", True, "8.8.8.8", "IPv4-mapped"),  # the registry: not globally reachable
    ("::ffff:0.0.0.0", True, "0.0.0.0", "This"),
    ("::ffff:255.255.255.255", True, "255.255.255.255", "Broadcast"),
    ("::127.0.0.1", True, "127.0.0.1", "Loopback"),
    ("::8.8.8.8", True, "8.8.8.8", "IPv4-compatible"),
    ("64:ff9b::8.8.8.8", False, "8.8.8.8", ""),
    ("64:ff9b::127.0.0.1", True, "127.0.0.1", "NAT64"),
    ("64:ff9b::a9fe:a9fe", True, "169.254.169.254", "Link Local"),
    ("64:ff9b::", True, "0.0.0.0", "NAT64"),
    ("64:ff9b::ffff:ffff", True, "255.255.255.255", "NAT64"),
    ("64:ff9b::1:0:0", True, None, "outside 2000::/3"),  # just outside the /96
    ("64:ff9b:1::", True, "0.0.0.0", "NAT64 local-use"),
    ("64:ff9b:1:808:8:800::", True, "8.8.8.8", "local use"),  # RFC 6052 /48 layout, u octet skipped
    ("64:ff9b:1:7f00:0:100::", True, "127.0.0.1", "Loopback"),
    ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", True, "255.255.255.255", "NAT64"),
    ("64:ff9b:2::", True, None, "outside 2000::/3"),
    ("2002:808:808::", False, "8.8.8.8", ""),
    ("2002:7f00:1::", True, "127.0.0.1", "6to4"),
    ("2002:c0a8:101::1", True, "192.168.1.1", "Private-Use"),
    ("2002::", True, "0.0.0.0", "6to4"),
    ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True, "255.255.255.255", "6to4"),
    ("2001:0:808:808::fefe:fefe", False, "8.8.8.8", ""),  # Teredo: server 8.8.8.8, client 1.1.1.1
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", True, "65.54.227.120", "192.0.2.45"),  # RFC 4380's example
    ("2001:0:808:808::80ff:fffe", True, "8.8.8.8", "Teredo client"),  # client 127.0.0.1
    ("2001:0:7f00:1::fefe:fefe", True, "127.0.0.1", "Teredo server"),
    ("2001::", True, "0.0.0.0", "Teredo server"),
    ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", True, "255.255.255.255", "Teredo"),
    ("2001:1::", True, None, "IETF Protocol Assignments"),  # just outside Teredo
]


@pytest.mark.parametrize(("addr", "refused", "inner", "why"), EMBEDDINGS)
def test_embeddings(addr: str, refused: bool, inner: str | None, why: str) -> None:
    ip = ipaddress.ip_address(addr)
    carried = [str(v4) for _, v4 in embedded(ip)]
    if inner is None:
        assert carried == []
    else:
        assert carried[0] == inner
    reason = refusal(ip)
    assert (reason is not None) is refused, reason
    if refused:
        assert why in reason, reason


def _ips(*a: str) -> list:
    return [ipaddress.ip_address(x) for x in a]


def test_a_mixed_answer_is_refused_whole() -> None:
    with pytest.raises(AddressRefused) as e:
        validate_answer("mixed.test", _ips("8.8.8.8", "2606:4700::1", "10.0.0.5"), [], [])
    assert "mix of public and non-public" in e.value.message
    assert "10.0.0.5" in e.value.message and "allow_private" in e.value.message
    with pytest.raises(AddressRefused):
        validate_answer("mixed.test", _ips("8.8.8.8", "::ffff:127.0.0.1"), [], [])


def test_an_empty_answer_is_an_error() -> None:
    with pytest.raises(ResolveError, match="empty answer"):
        validate_answer("empty.test", [], [], [])


def test_a_public_answer_passes_in_order() -> None:
    v = validate_answer("ok.test", _ips("2606:4700::1", "8.8.8.8"), [], [])
    assert [str(a) for a in v.addresses] == ["2606:4700::1", "8.8.8.8"] and v.widened == ()


def test_allow_private_widens_exactly_what_it_names() -> None:
    nets, hosts = parse_networks(["10.1.0.0/16", "docs.internal", "[fd00::5]"])
    v = validate_answer("x.test", _ips("10.1.2.3", "8.8.8.8"), nets, hosts)
    assert v.widened == (("10.1.2.3", "10.1.0.0/16"),)
    v6 = validate_answer("y.test", _ips("fd00::5"), nets, hosts)
    assert v6.widened == (("fd00::5", "fd00::5/128"),)
    with pytest.raises(AddressRefused):
        validate_answer("x.test", _ips("10.2.0.1"), nets, hosts)  # outside the named network
    with pytest.raises(AddressRefused):
        validate_answer("y.test", _ips("fd00::6"), nets, hosts)
    by_name = validate_answer("docs.internal", _ips("192.168.3.4", "127.0.0.1"), nets, hosts)
    assert {w[1] for w in by_name.widened} == {"docs.internal"}
    with pytest.raises(AddressRefused):
        validate_answer("www.docs.internal", _ips("192.168.3.4"), nets, hosts)  # exactly the name


def test_table_is_not_ipaddress_is_global() -> None:
    # ipaddress.is_global has been wrong for some of these on supported Python versions;
    # the table decides, whatever the stdlib says.
    assert refusal(ipaddress.ip_address("100.64.0.1")) is not None
    assert refusal(ipaddress.ip_address("192.0.0.9")) is None
    assert refusal(ipaddress.ip_address("2001:db8::1")) is not None


def test_allow_private_hostnames_are_idna_normalised() -> None:
    nets, hosts = parse_networks(["Bücher.Example."])
    assert hosts == ["xn--bcher-kva.example"] and nets == []
    v = validate_answer("xn--bcher-kva.example", _ips("10.0.0.1"), nets, hosts)
    assert v.widened == (("10.0.0.1", "xn--bcher-kva.example"),)

"""Which addresses a fetch may reach: an explicit table, not ``ipaddress.is_global``.

The table is the IANA IPv4 and IPv6 Special-Purpose Address Registries (with their
"Globally Reachable" column), plus multicast and the deprecated site-local range. An address is
refused when the most specific entry that contains it is not globally reachable. Addresses that
carry an IPv4 address inside them are unwrapped and the inner address checked again:
IPv4-mapped (``::ffff:0:0/96``), IPv4-compatible (``::/96``, deprecated: refused whatever it
carries), NAT64 (``64:ff9b::/96``; ``64:ff9b:1::/48`` is local-use and refused whatever it
carries), 6to4 (``2002::/16``) and Teredo (``2001::/32``, server and de-obfuscated client).

``allow_private`` (CIDRs) widens exactly the addresses inside those networks.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import idna

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Range:
    network: IPNetwork
    name: str
    source: str
    reachable: bool  # the registry's "Globally Reachable"


def _r(cidr: str, name: str, source: str, reachable: bool = False) -> Range:
    return Range(ipaddress.ip_network(cidr), name, source, reachable)


# IANA IPv4 Special-Purpose Address Registry (iana-ipv4-special-registry).
IPV4_TABLE: tuple[Range, ...] = (
    _r("0.0.0.0/8", '"This network"', "RFC 791"),
    _r("0.0.0.0/32", '"This host on this network"', "RFC 1122"),
    _r("10.0.0.0/8", "Private-Use", "RFC 1918"),
    _r("100.64.0.0/10", "Shared Address Space", "RFC 6598"),
    _r("127.0.0.0/8", "Loopback", "RFC 1122"),
    _r("169.254.0.0/16", "Link Local", "RFC 3927"),
    _r("172.16.0.0/12", "Private-Use", "RFC 1918"),
    _r("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890"),
    _r("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335"),
    _r("192.0.0.8/32", "IPv4 dummy address", "RFC 7600"),
    _r("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", True),
    _r("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    _r("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880"),
    _r("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880"),
    _r("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737"),
    _r("192.31.196.0/24", "AS112-v4", "RFC 7535", True),
    _r("192.52.193.0/24", "AMT", "RFC 7450", True),
    _r("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526"),
    _r("192.168.0.0/16", "Private-Use", "RFC 1918"),
    _r("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", True),
    _r("198.18.0.0/15", "Benchmarking", "RFC 2544"),
    _r("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737"),
    _r("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737"),
    _r("224.0.0.0/4", "Multicast", "RFC 5771"),
    _r("240.0.0.0/4", "Reserved", "RFC 1112"),
    _r("255.255.255.255/32", "Limited Broadcast", "RFC 919"),
)

# IANA IPv6 Special-Purpose Address Registry (iana-ipv6-special-registry), under the IPv6
# Address Space registry's split: only 2000::/3 is Global Unicast, the rest is reserved or
# special (the entries below that are reachable inside it, e.g. NAT64, are more specific).
IPV6_TABLE: tuple[Range, ...] = (
    _r("::/0", "Not Global Unicast (outside 2000::/3)", "RFC 4291"),
    _r("2000::/3", "Global Unicast", "RFC 4291", True),
    _r("::1/128", "Loopback Address", "RFC 4291"),
    _r("::/128", "Unspecified Address", "RFC 4291"),
    _r("::/96", "IPv4-compatible (deprecated)", "RFC 4291"),
    _r("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291"),
    _r("64:ff9b::/96", "IPv4-IPv6 Translation", "RFC 6052", True),
    _r("64:ff9b:1::/48", "IPv4-IPv6 Translation (local use)", "RFC 8215"),
    _r("100::/64", "Discard-Only Address Block", "RFC 6666"),
    _r("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780"),
    _r("2001::/23", "IETF Protocol Assignments", "RFC 2928"),
    _r("2001::/32", "TEREDO", "RFC 4380", True),
    _r("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", True),
    _r("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    _r("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", True),
    _r("2001:2::/48", "Benchmarking", "RFC 5180"),
    _r("2001:3::/32", "AMT", "RFC 7450", True),
    _r("2001:4:112::/48", "AS112-v6", "RFC 7535", True),
    _r("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843"),
    _r("2001:20::/28", "ORCHIDv2", "RFC 7343", True),
    _r("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", True),
    _r("2001:db8::/32", "Documentation", "RFC 3849"),
    _r("2002::/16", "6to4", "RFC 3056", True),
    _r("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", True),
    _r("3fff::/20", "Documentation", "RFC 9637"),
    _r("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602"),
    _r("fc00::/7", "Unique-Local", "RFC 4193"),
    _r("fe80::/10", "Link-Local Unicast", "RFC 4291"),
    _r("fec0::/10", "Site-Local (deprecated)", "RFC 3879"),
    _r("ff00::/8", "Multicast", "RFC 4291"),
)

_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_COMPAT = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_6TO4 = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")


def most_specific(ip: IPAddress) -> Range | None:
    table = IPV4_TABLE if ip.version == 4 else IPV6_TABLE
    best: Range | None = None
    for entry in table:
        if ip in entry.network and (best is None or entry.network.prefixlen > best.network.prefixlen):
            best = entry
    return best


def embedded(ip: IPAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, with the embedding's name."""
    if ip.version == 4:
        return []
    v = int(ip)
    if ip in _MAPPED:
        return [("IPv4-mapped", ipaddress.IPv4Address(v & 0xFFFFFFFF))]
    if ip in _COMPAT and v > 1:
        return [("IPv4-compatible", ipaddress.IPv4Address(v & 0xFFFFFFFF))]
    if ip in _NAT64:
        return [("NAT64", ipaddress.IPv4Address(v & 0xFFFFFFFF))]
    if ip in _NAT64_LOCAL:
        # RFC 6052 /48 layout: bits 48..63 and 72..95 (bits 64..71 are the u octet).
        hi = (v >> 64) & 0xFFFF
        lo = (v >> 32) & 0xFFFFFF
        return [("NAT64 local-use", ipaddress.IPv4Address((hi << 16) | (lo >> 8)))]
    if ip in _6TO4:
        return [("6to4", ipaddress.IPv4Address((v >> 80) & 0xFFFFFFFF))]
    if ip in _TEREDO:
        server = ipaddress.IPv4Address((v >> 64) & 0xFFFFFFFF)
        client = ipaddress.IPv4Address((v & 0xFFFFFFFF) ^ 0xFFFFFFFF)
        return [("Teredo server", server), ("Teredo client", client)]
    return []


def allow_private_problem(entry: str) -> str | None:
    """Why an ``allow_private`` entry can match nothing (a typo'd CIDR, a wildcard), or None."""
    text = entry.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ipaddress.ip_network(text, strict=False)
        return None
    except ValueError:
        pass
    if "/" in text:
        return (
            f"{entry!r} is not a valid CIDR: write an address and a prefix length "
            "(0..32 for IPv4, 0..128 for IPv6), e.g. 10.20.0.0/16"
        )
    if "*" in text:
        return (
            f"{entry!r}: wildcards are not supported; a hostname matches exactly that name, so name each "
            "one, or give the network its addresses are in as a CIDR"
        )
    try:
        idna.encode(text.lower().rstrip("."), uts46=True, std3_rules=True)
    except (idna.IDNAError, UnicodeError, ValueError):
        return f"{entry!r} is neither an IP address, a CIDR nor a hostname"
    return None


def parse_networks(entries: list[str]) -> tuple[list[IPNetwork], list[str]]:
    """Split ``allow_private`` into networks (CIDRs or single addresses) and hostnames."""
    nets: list[IPNetwork] = []
    hosts: list[str] = []
    for entry in entries:
        text = entry.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        try:
            nets.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            name = text.lower().rstrip(".")
            try:
                name = idna.encode(name, uts46=True, std3_rules=True).decode("ascii")
            except (idna.IDNAError, UnicodeError):
                pass
            hosts.append(name)
    return nets, hosts


def refusal(ip: IPAddress) -> str | None:
    """Why ``ip`` must not be fetched, or None when it is public. No allow list applies here."""
    entry = most_specific(ip)
    inner = embedded(ip)
    for kind, v4 in inner:
        why = refusal(v4)
        if why is not None:
            return f"{ip} is {kind} for {v4}, and {why}"
    if entry is not None and not entry.reachable:
        if inner:
            return f"{ip} is in {entry.network} ({entry.name}, {entry.source}), carrying {inner[0][1]}"
        return f"{ip} is in {entry.network} ({entry.name}, {entry.source})"
    return None


def allowed_by(ip: IPAddress, nets: list[IPNetwork]) -> IPNetwork | None:
    """The allow_private network that covers ``ip`` (or the address it carries)."""
    candidates: list[IPAddress] = [ip, *(v4 for _, v4 in embedded(ip))]
    for net in nets:
        for cand in candidates:
            if cand.version == net.version and cand in net:
                return net
    return None

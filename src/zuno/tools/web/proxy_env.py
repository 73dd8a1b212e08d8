"""Which proxy a hop goes through: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY.

Read from the process environment at each hop, the lowercase spelling winning as curl does.
``NO_PROXY`` is parsed here (httpx's handling rejects socks4 and ignores CIDRs): comma or
space separated entries; ``*`` alone bypasses every proxy; a domain matches itself and its
subdomains (a leading ``.`` or ``*.`` is ignored); ``host:port`` matches that port only; an IP
address or CIDR matches a literal IP host inside it (``[v6]`` and ``[v6]:port`` too).

A proxy URL is ``scheme://[user:password@]host[:port]`` with scheme http (the default when none
is written), https, socks4, socks4a, socks5 or socks5h; ``socks4a``/``socks5h`` ask the proxy to
resolve, which Zuno never does — the hop is resolved and validated locally and the proxy is
given the validated IP. Credentials are kept out of every ``str`` of a route.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from zuno.tools.web.errors import ProxyFailed
from zuno.tools.web.urls import Target

PROXY_SCHEMES = ("http", "https", "socks4", "socks4a", "socks5", "socks5h")


@dataclass(frozen=True, slots=True)
class Proxy:
    scheme: str  # one of PROXY_SCHEMES
    host: str
    port: int
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    source: str = ""  # the environment variable it came from

    @property
    def kind(self) -> str:
        """The handshake: http (CONNECT), https (TLS then CONNECT), socks4 or socks5."""
        return {"socks4a": "socks4", "socks5h": "socks5"}.get(self.scheme, self.scheme)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme} proxy {host}:{self.port}"


def _get(env: Mapping[str, str], name: str) -> tuple[str, str] | None:
    for key in (name.lower(), name.upper()):
        value = env.get(key)
        if value is not None and value.strip():
            return key, value.strip()
    return None


def parse_proxy(value: str, source: str) -> Proxy:
    text = value
    scheme = "http"
    if "://" in text:
        scheme, _, text = text.partition("://")
        scheme = scheme.lower()
    if scheme not in PROXY_SCHEMES:
        raise ProxyFailed(
            f"{source}: the proxy scheme {scheme!r} is not one of {', '.join(PROXY_SCHEMES)}. "
            f"Write {source} as scheme://[user:password@]host[:port] with one of those."
        )
    text = text.split("/", 1)[0]
    username = password = None
    if "@" in text:
        userinfo, _, text = text.rpartition("@")
        user, sep, pw = userinfo.partition(":")
        username = unquote(user)
        password = unquote(pw) if sep else None
    form = f"Write {source} as scheme://[user:password@]host[:port]"
    if text.startswith("["):
        close = text.find("]")
        rest = text[close + 1 :] if close > 0 else ""
        if close < 0 or (rest and not rest.startswith(":")):
            raise ProxyFailed(f"{source}: the proxy's bracketed IPv6 address is not closed by ']'. {form}.")
        host = text[1:close]
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ProxyFailed(f"{source}: the proxy host [{host}] is not an IPv6 address. {form}.") from None
    else:
        host, _, port_text = text.partition(":")
        if any(c in host for c in "[]@ \t\\"):
            raise ProxyFailed(f"{source}: the proxy host {host!r} is not a host name or address. {form}.")
    if not host:
        raise ProxyFailed(f"{source}: the proxy has no host. {form}.")
    default = 443 if scheme == "https" else 1080
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        raise ProxyFailed(f"{source}: the proxy port is not a number. {form}.") from None
    if not 1 <= port <= 65535:
        raise ProxyFailed(f"{source}: the proxy port {port} is out of range (1..65535). {form}.")
    return Proxy(scheme, host.lower(), port, username, password, source)


@dataclass(frozen=True, slots=True)
class _Entry:
    kind: str  # "all" | "domain" | "net"
    domain: str = ""
    net: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None


def parse_no_proxy(value: str) -> list[_Entry]:
    entries: list[_Entry] = []
    for raw in value.replace(",", " ").split():
        token = raw.strip().lower()
        if not token:
            continue
        if token == "*":
            entries.append(_Entry("all"))
            continue
        port: int | None = None
        if token.startswith("["):
            close = token.find("]")
            inner, rest = token[1:close], token[close + 1 :]
            if rest.startswith(":") and rest[1:].isdigit():
                port = int(rest[1:])
            token = inner
        elif token.count(":") == 1:
            name, _, p = token.partition(":")
            if p.isdigit():
                token, port = name, int(p)
        try:
            entries.append(_Entry("net", net=ipaddress.ip_network(token, strict=False), port=port))
            continue
        except ValueError:
            pass
        if token.startswith("*."):
            token = token[2:]
        token = token.lstrip(".").rstrip(".")
        if token:
            entries.append(_Entry("domain", domain=token, port=port))
    return entries


def bypasses(entries: list[_Entry], target: Target) -> bool:
    for e in entries:
        if e.port is not None and e.port != target.port:
            continue
        if e.kind == "all":
            return True
        if e.kind == "net" and target.ip is not None and e.net is not None:
            if target.ip.version == e.net.version and target.ip in e.net:
                return True
        if e.kind == "domain" and target.ip is None:
            if target.host == e.domain or target.host.endswith("." + e.domain):
                return True
    return False


def proxy_for(target: Target, env: Mapping[str, str]) -> Proxy | None:
    """The proxy this hop must go through, or None for a direct connection."""
    no_proxy = _get(env, "no_proxy")
    if no_proxy and bypasses(parse_no_proxy(no_proxy[1]), target):
        return None
    found = _get(env, f"{target.scheme}_proxy") or _get(env, "all_proxy")
    if found is None:
        return None
    return parse_proxy(found[1], found[0])

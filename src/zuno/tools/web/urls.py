"""The one URL parser: what it accepts is exactly what the request is built from.

``parse_target`` turns the model's string into a ``Target`` (scheme, ASCII host, port, request
target). The client never parses the string again: the httpcore request, the Host header, the
TLS SNI and the connection's origin are all built from the ``Target``'s fields, so the validator
and the client cannot disagree about the host.

Refused (``UrlRefused``, nothing is sent): a scheme other than http/https; any userinfo (an ``@``
anywhere in the authority); a backslash anywhere; NUL, control characters, DEL, C1 controls and
spaces anywhere (WHATWG parsers silently drop tabs and newlines; this one refuses them); a
percent sign in the host; an IPv6 literal with a zone id; a non-canonical numeric host
(``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``, ``0``, mixed radix, a trailing dot after
an address) — refused rather than normalised, naming the address it would mean, because other
parsers read those spellings differently; a host that fails IDNA 2008 / UTS 46.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import idna

from zuno.tools.web.errors import UrlRefused

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# A host and a port with no scheme ("localhost:8080", "example.com:443/x"), which _SCHEME would
# read as the scheme "localhost".
_HOST_PORT = re.compile(r"^[A-Za-z0-9.-]+:[0-9]+(?:[/?#]|$)")
_DEFAULT_PORT = {"http": 80, "https": 443}
_IPV4_PART = re.compile(r"^(0|[1-9][0-9]{0,2})$")
_NUMBERISH = re.compile(r"^(0[xX][0-9A-Fa-f]*|[0-9]+)$")
# Characters kept as they are in the path and in the query; anything else is percent-encoded
# (UTF-8), as a browser sends it (WHATWG URL Standard): the path percent-encode set (C0 controls,
# space, '"', '#', '<', '>', '?', '^', '`', '{', '}' and everything above '~') and the special-query
# percent-encode set (C0 controls, space, '"', '#', "'", '<', '>' and everything above '~').
# Existing %XX escapes are kept verbatim.
_ASCII_SAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&()*+,;=:@/%[]|"
_PATH_SAFE = frozenset(_ASCII_SAFE + "'")
_QUERY_SAFE = frozenset(_ASCII_SAFE + "?^`{}")


@dataclass(frozen=True, slots=True)
class Target:
    """A validated request target."""

    scheme: str  # "http" | "https"
    host: str  # ASCII: an A-label hostname, or an IP address's compressed text (no brackets)
    port: int
    path: str  # the request target: path and query, never empty, no fragment
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None  # set when the host is an IP literal

    @property
    def default_port(self) -> bool:
        return self.port == _DEFAULT_PORT[self.scheme]

    @property
    def authority(self) -> str:
        """The Host header's value: the host (bracketed when IPv6) and a non-default port."""
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        return host if self.default_port else f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.authority}"

    @property
    def url(self) -> str:
        return self.origin + self.path

    def same_origin(self, other: Target) -> bool:
        return (self.scheme, self.host, self.port) == (other.scheme, other.host, other.port)


def _refuse(url: str, why: str, fix: str) -> UrlRefused:
    return UrlRefused(f"url {_show(url)} is refused: {why}. {fix}")


def redact(url: str) -> str:
    """The URL with any userinfo (``user:password@``) replaced by ``***@``: credentials in a
    refused URL are never shown, logged or recorded in a message."""
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/*", url)  # also "http:user:pw@host" (no "//")
    start = scheme.end() if scheme else 0
    end = len(url)
    for sep in "/?#":
        i = url.find(sep, start)
        if i != -1:
            end = min(end, i)
    at = url.rfind("@", start, end)
    return url if at == -1 else f"{url[:start]}***{url[at:]}"


def _show(url: str) -> str:
    # Control characters are shown escaped so the message itself stays one clean line.
    url = redact(url)
    return repr(url) if len(url) <= 300 else repr(url[:300] + "...")


def check_characters(url: str) -> None:
    for i, ch in enumerate(url):
        o = ord(ch)
        if o < 0x20 or o == 0x7F or 0x80 <= o <= 0x9F:
            raise _refuse(url, f"it contains the control character U+{o:04X} at offset {i}", "Remove it.")
        if 0xD800 <= o <= 0xDFFF:
            raise _refuse(url, f"it contains a lone surrogate U+{o:04X} at offset {i}", "Send valid Unicode.")
        if ch == " " or ch == "\u3000" or (ch.isspace()):
            raise _refuse(url, f"it contains whitespace at offset {i}", "Percent-encode a space as %20.")
        if ch == "\\":
            raise _refuse(
                url,
                "it contains a backslash, which URL parsers disagree about (some read it as '/')",
                "Percent-encode it as %5C.",
            )


def _ipv4_meaning(labels: list[str]) -> ipaddress.IPv4Address | None:
    """What a WHATWG parser makes of an all-numeric host (None when some part is out of range)."""
    nums: list[int] = []
    for part in labels:
        if part == "":
            return None
        if part[:2] in ("0x", "0X"):
            nums.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part[0] == "0":
            try:
                nums.append(int(part, 8))
            except ValueError:
                return None
        else:
            nums.append(int(part))
    if not 1 <= len(nums) <= 4 or any(n > 255 for n in nums[:-1]):
        return None
    last = nums[-1]
    if last >= 256 ** (5 - len(nums)):
        return None
    value = last
    for i, n in enumerate(nums[:-1]):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _host(url: str, raw: str) -> tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address | None]:
    if raw.startswith("["):
        inner = raw[1:-1]
        if "%" in inner:
            raise _refuse(url, "an IPv6 literal with a zone id names an interface, not a host", "Remove the zone id.")
        try:
            ip6 = ipaddress.IPv6Address(inner)
        except ValueError:
            raise _refuse(url, f"[{inner}] is not an IPv6 address", "Write a valid IPv6 literal.") from None
        return ip6.compressed, ip6
    if raw == "":
        raise _refuse(url, "it has no host", "Write the host after '//'.")
    if "%" in raw:
        raise _refuse(url, "the host contains a percent escape", "Write the host itself, not escaped.")
    # UTS 46 mapping first: fullwidth digits and dots (１２７．０．０．１) become ASCII here, so
    # the numeric check below sees what a resolver would see.
    try:
        mapped = idna.uts46_remap(raw, std3_rules=True, transitional=False)
    except (idna.IDNAError, UnicodeError, ValueError) as e:
        raise _refuse(url, f"the host {raw!r} fails IDNA (UTS 46): {e}", "Check the hostname's spelling.") from None
    labels = mapped.split(".")
    trailing_dot = len(labels) > 1 and labels[-1] == ""
    core = labels[:-1] if trailing_dot else labels
    if any(label == "" for label in core):
        # "a..b", "0..", ".a": an empty label names no host (and would hide a numeric last label).
        raise _refuse(url, f"the host {raw!r} has an empty label", "Remove the doubled or leading dot.")
    if core and _NUMBERISH.match(core[-1]):
        # WHATWG treats a host whose last label is a number as an IPv4 address.
        canonical = len(core) == 4 and all(_IPV4_PART.match(p) for p in core) and not trailing_dot
        if canonical and all(int(p) <= 255 for p in core):
            ip4 = ipaddress.IPv4Address(".".join(core))
            return str(ip4), ip4
        meaning = _ipv4_meaning(core) if all(_NUMBERISH.match(p) for p in core) else None
        means = f" (it would mean {meaning})" if meaning is not None else ""
        fix = f"Write the address as {meaning}." if meaning is not None else "Write a dotted-quad address."
        raise _refuse(url, f"the host {raw!r} is a non-canonical numeric address{means}", fix)
    if trailing_dot:
        mapped = mapped[:-1]
    try:
        ascii_host = idna.encode(mapped, uts46=False, std3_rules=True).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError) as e:
        raise _refuse(url, f"the host {raw!r} fails IDNA 2008: {e}", "Check the hostname's spelling.") from None
    return ascii_host.lower(), None


def _encode_path(rest: str) -> str:
    """The path and query (no fragment) as sent: the first '?' starts the query."""
    out = []
    safe = _PATH_SAFE
    for ch in rest:
        if ch in safe:
            out.append(ch)
        elif ch == "?" and safe is _PATH_SAFE:
            out.append(ch)
            safe = _QUERY_SAFE
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def _is_space(ch: str) -> bool:
    o = ord(ch)
    return ch.isspace() and not (o < 0x20 or o == 0x7F or 0x80 <= o <= 0x9F)


def encode_location(location: str) -> str:
    """A Location header's raw spaces percent-encoded where a browser encodes them.

    A server that sends ``Location: /a b`` (many do, from a file name) is followed to ``/a%20b``
    by every browser: the WHATWG URL parser percent-encodes a space (U+0020, and, as UTF-8, any
    other space character such as U+00A0) in the path, the query and the fragment. A space in the
    scheme or the host is left as it is, so the redirect is refused (a browser refuses it too);
    control characters (tab, line breaks) are left for ``check_characters`` to refuse. Other raw
    characters (``"``, ``<``, ``>``, non-ASCII) are encoded by the parser itself."""
    if not any(_is_space(ch) for ch in location):
        return location
    start = 0
    m = _SCHEME.match(location)
    after = location[m.end() :] if m else location
    if after.startswith("//"):  # an authority follows: it ends at the first '/', '?' or '#'
        base = len(location) - len(after) + 2
        ends = [i for i in (location.find(sep, base) for sep in "/?#") if i != -1]
        start = min(ends) if ends else len(location)
    head, tail = location[:start], location[start:]
    return head + "".join("".join(f"%{b:02X}" for b in ch.encode("utf-8")) if _is_space(ch) else ch for ch in tail)


def collapse_slashes(location: str) -> str:
    """Three or more slashes before a Location's authority read as two, as browsers read them: for
    http(s) the WHATWG parser skips every slash there, so ``///b.example/x`` and
    ``http:////b.example/x`` name the host b.example (urljoin made the first a path on the current
    host). The host is then parsed and checked like any other."""
    m = _SCHEME.match(location)
    if m and m.group(1).lower() in _DEFAULT_PORT:
        head, rest = location[: m.end()], location[m.end() :]
    elif m:
        return location
    else:
        head, rest = "", location
    if rest.startswith("///"):
        return head + "//" + rest.lstrip("/")
    return location


def space_in_authority(location: str) -> bool:
    """Whether ``encode_location`` left a space: one in the scheme's or the host's part."""
    return any(_is_space(ch) for ch in location)


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _unescape_unreserved(m: re.Match[str]) -> str:
    ch = chr(int(m.group(1), 16))
    return ch if ch in _UNRESERVED else f"%{m.group(1).upper()}"


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 on an absolute path: "/a/./b/../c" is "/a/c"; never above the root."""
    segments = path.split("/")
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg in (".", ".."):
            if seg == ".." and len(out) > 1:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(seg)
    return "/".join(out)


def normalize_path(tail: str) -> str:
    """The path of an encoded path-and-query in its one spelling (RFC 3986 6.2.2): escapes of
    unreserved characters decoded ("%61dmin" is "admin", "%2e%2e" is ".."), other escapes in
    upper case, dot segments removed. Servers read every spelling as this one, so a permission
    pattern on the canonical URL cannot be dodged by "/public/../admin". The query is left as
    sent."""
    path, sep, query = tail.partition("?")
    path = _remove_dot_segments(_ESCAPE.sub(_unescape_unreserved, path))
    return path + sep + query


def parse_target(url: str) -> Target:
    if not isinstance(url, str) or not url:
        raise UrlRefused("url is empty. Give an http:// or https:// URL.")
    check_characters(url)
    m = _SCHEME.match(url)
    if not m:
        raise _refuse(url, "it has no scheme", "Write http:// or https:// in front.")
    scheme = m.group(1).lower()
    if scheme not in _DEFAULT_PORT and _HOST_PORT.match(url):  # "localhost:8080/x": a host and port
        raise _refuse(url, "it has no scheme", f"Write http://{url} or https://{url}.")
    if scheme not in _DEFAULT_PORT:
        raise _refuse(url, f"the scheme {scheme!r} is not http or https", "Only http:// and https:// are fetched.")
    rest = url[m.end() :]
    if not rest.startswith("//") or rest.startswith("///"):
        raise _refuse(url, "the scheme must be followed by '//' and a host", f"Write {scheme}://host/path.")
    rest = rest[2:]
    end = len(rest)
    for sep in "/?#":
        i = rest.find(sep)
        if i != -1:
            end = min(end, i)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        raise _refuse(
            url,
            "it carries userinfo (credentials before '@'); webfetch accepts only credential-free targets",
            "Remove everything up to and including '@'.",
        )
    port: int | None = None
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            raise _refuse(url, "an IPv6 literal is missing its ']'", "Close the bracket.")
        host_raw, after = authority[: close + 1], authority[close + 1 :]
        if after and not after.startswith(":"):
            raise _refuse(url, f"unexpected {after!r} after the IPv6 literal", "Write [address]:port.")
        port_raw = after[1:] if after else None
    else:
        host_raw, sep, port_raw_s = authority.partition(":")
        port_raw = port_raw_s if sep else None
    if port_raw is not None:
        if not port_raw.isascii() or not port_raw.isdigit():
            raise _refuse(url, f"the port {port_raw!r} is not a number", "Write a port 1..65535 or none.")
        port = int(port_raw)
        if not 1 <= port <= 65535:
            raise _refuse(url, f"the port {port} is out of range", "Write a port 1..65535.")
    host, ip = _host(url, host_raw)
    tail = tail.partition("#")[0]
    if not tail.startswith("/"):
        tail = "/" + tail
    return Target(scheme, host, port or _DEFAULT_PORT[scheme], normalize_path(_encode_path(tail)), ip)

"""What a fetched body becomes: decompression under the cap, charset, HTML to Markdown.

The cap counts decompressed bytes while the body streams (``Inflater``), so a gzip bomb is
refused after at most ``max_bytes`` + one chunk of output, never inflated whole. HTML becomes
Markdown through markdownify (MIT, small, keeps every part of the page: it converts what is
there rather than guessing the "main content" as trafilatura does, which drops tables, code
and navigation a coding agent may need, and pulls in lxml and several more packages).
JSON, text and XML come back as they are, decoded by the declared charset, else a BOM, an HTML
meta charset, UTF-8, or charset-normalizer's guess. PDF, images, audio, video, fonts and
archives are refused with a better tool named.
"""

from __future__ import annotations

import codecs
import re
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zuno import limits
from zuno.tools.web.errors import BodyTooLarge, ProtocolFailed

_TEXT_TYPES = (
    "application/json",
    "application/xml",
    "application/javascript",
    "application/ecmascript",
    "application/x-javascript",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/x-sh",
    "application/sql",
    "application/graphql",
    "application/x-ndjson",
    "application/atom+xml",
    "application/rss+xml",
)
HTML_TYPES = ("text/html", "application/xhtml+xml")

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
)


@dataclass(frozen=True, slots=True)
class ContentType:
    mime: str
    charset: str | None

    @classmethod
    def parse(cls, value: str | None) -> ContentType:
        if not value:
            return cls("", None)
        parts = value.split(";")
        mime = parts[0].strip().lower()
        charset = None
        for p in parts[1:]:
            k, _, v = p.strip().partition("=")
            if k.strip().lower() == "charset":
                charset = v.strip().strip('"').strip("'") or None
        return cls(mime, charset)

    @property
    def is_html(self) -> bool:
        return self.mime in HTML_TYPES

    @property
    def is_text(self) -> bool:
        m = self.mime
        return m.startswith("text/") or m in _TEXT_TYPES or m.endswith(("+json", "+xml"))


def refusal_for(mime: str, url: str) -> str | None:
    """Why this type is not returned as text, naming what to use instead."""
    if mime == "application/pdf":
        return (
            f"{url} is a PDF, which webfetch does not turn into text. Download it with the shell tool "
            "(curl -fsSLo file.pdf URL) and extract its text with pdftotext, then read that file."
        )
    if mime.startswith("image/"):
        return (
            f"{url} is an image ({mime}). Download it with the shell tool (curl -fsSLo FILE URL) and open it "
            "with the image viewer (view_image in the chord profile, read otherwise)."
        )
    if (
        mime.startswith(("audio/", "video/", "font/"))
        or mime
        in (
            "application/zip",
            "application/gzip",
            "application/x-tar",
            "application/x-7z-compressed",
            "application/wasm",
        )
        or mime in UNDECLARED[1:]
    ):
        return f"{url} is binary content ({mime}). Download it with the shell tool (curl -fsSLo FILE URL) instead."
    return None


# Types that say nothing about the content: the first bytes decide.
UNDECLARED = ("", "application/octet-stream", "binary/octet-stream", "application/unknown")


def sniff(head: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if b"\0" in head[:8192]:
        return "application/octet-stream"
    return None


class Inflater:
    """Content-Encoding identity / gzip / deflate, counting decoded bytes against a cap."""

    def __init__(self, encoding: str | None, max_bytes: int, url: str) -> None:
        enc = (encoding or "identity").strip().lower()
        if "," in enc:
            raise ProtocolFailed(f"{url} answered with stacked content encodings ({enc}), which are not decoded")
        if enc not in ("identity", "", "gzip", "x-gzip", "deflate"):
            raise ProtocolFailed(f"{url} answered with the content encoding {enc!r}, which was not asked for")
        self.encoding = enc
        self.budget = max_bytes
        self.max_bytes = max_bytes
        self.url = url
        self.total = 0
        # Bytes as they came over the wire: bounded as well, so bytes that decompress to nothing
        # (padding after the compressed stream's end, endless empty gzip members) cannot be read
        # until the deadline. The slack covers the framing of incompressible data (stored blocks).
        self.wire = 0
        self.max_wire = max_bytes + max_bytes // 1000 + 1024
        self._raw_deflate_tried = False
        self._done = False
        self._fed = False
        self._d = self._new()

    def _new(self) -> zlib._Decompress | None:
        if self.encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.encoding == "deflate":
            return zlib.decompressobj(zlib.MAX_WBITS)
        return None

    def refuse_declared(self, length: int) -> None:
        raise BodyTooLarge(
            f"the body of {self.url} is {length} bytes (its Content-Length), over the {self.max_bytes}-byte cap "
            "(webfetch.max_bytes); it was refused before it was read. Fetch a smaller resource, or download it "
            "with the shell tool."
        )

    def _count(self, n: int) -> None:
        self.total += n
        if self.total > self.max_bytes:
            what = "decompressed body" if self._d is not None else "body"
            raise BodyTooLarge(
                f"the {what} of {self.url} is over the {self.max_bytes}-byte cap (webfetch.max_bytes); "
                "it was refused while streaming. Fetch a smaller resource, or download it with the shell tool."
            )

    def finish(self) -> None:
        """The body ended: a compressed stream must have reached its own end, or the text is cut."""
        if self._d is not None and self._fed and not self._done and not self._d.eof:
            raise ProtocolFailed(
                f"the {self.encoding} body of {self.url} ends before its compressed stream does: it was cut "
                f"short after {self.total} decompressed bytes, so it is not returned"
            )

    def _count_wire(self, n: int) -> None:
        self.wire += n
        if self._d is not None and self.wire > self.max_wire:
            raise BodyTooLarge(
                f"the {self.encoding} body of {self.url} is over {self.max_wire} bytes as sent (the cap, "
                f"webfetch.max_bytes {self.max_bytes}, with room for the compression's framing) and had "
                f"decompressed to {self.total} bytes; it was refused while streaming. Fetch a smaller resource, "
                "or download it with the shell tool."
            )

    def feed(self, data: bytes) -> bytes:
        if data:
            self._fed = True
        self._count_wire(len(data))
        if self._done:
            return b""
        if self._d is None:
            self._count(len(data))
            return data
        out = bytearray()
        buf = data
        while buf:
            try:
                chunk = self._d.decompress(buf, self.max_bytes - self.total + 1)
            except zlib.error:
                if self.encoding == "deflate" and not self._raw_deflate_tried and self.total == 0:
                    # Some servers send raw deflate without the zlib wrapper.
                    self._raw_deflate_tried = True
                    self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise ProtocolFailed(f"the {self.encoding} body of {self.url} is corrupt") from None
            self._count(len(chunk))
            out += chunk
            buf = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if rest.startswith(b"\x1f\x8b") and self.encoding != "deflate":
                    # Another gzip member follows.
                    buf = rest
                    self._d = self._new()
                else:
                    # Bytes after the end of the stream (padding some servers send) are ignored.
                    self._done = True
                    break
        return bytes(out)


# At most one invalid sequence per this many characters is read as stray bytes of the charset tried.
STRAY_BYTES_RATIO = 100
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""\A(?:\xef\xbb\xbf)?\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)["']""")


# The WHATWG Encoding Standard's labels (https://encoding.spec.whatwg.org/#names-and-labels): what a
# charset label means on the web, as the Python codec that decodes it. A browser reads a label
# through this table only — "us-ascii" and "iso-8859-1" are windows-1252, "shift_jis" is
# windows-31j (NEC and IBM extensions: ①, Ⅲ), "iso-8859-11" is windows-874, "big5" is Big5-HKSCS,
# "utf-16" is UTF-16LE — and ignores a label it does not list ("utf-7", "cp437"), so Python's own
# codec aliases are never consulted: "utf-7" would turn "+ADw-script+AD4-" into "<script>", text no
# browser shows. GBK labels decode as gbk (the gb18030 superset only adds four-byte sequences).
_REPLACEMENT = "replacement"
_USER_DEFINED = "x-user-defined"
_WHATWG_LABELS: dict[str, str] = {
    label: codec
    for codec, labels in {
        "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
        "cp866": "866 cp866 csibm866 ibm866",
        "iso8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
        "iso8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
        "iso8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
        "iso8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 "
        "iso_8859-5:1988",
        "iso8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e "
        "iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
        "iso8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 "
        "iso_8859-7 iso_8859-7:1987 sun_eu_greek",
        "iso8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 "
        "iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
        "iso8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
        "iso8859-13": "iso-8859-13 iso8859-13 iso885913",
        "iso8859-14": "iso-8859-14 iso8859-14 iso885914",
        "iso8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
        "iso8859-16": "iso-8859-16",
        "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
        "koi8-u": "koi8-ru koi8-u",
        "mac-roman": "csmacintosh mac macintosh x-mac-roman",
        "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
        "cp1250": "cp1250 windows-1250 x-cp1250",
        "cp1251": "cp1251 windows-1251 x-cp1251",
        "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 "
        "iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
        "cp1253": "cp1253 windows-1253 x-cp1253",
        "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 "
        "latin5 windows-1254 x-cp1254",
        "cp1255": "cp1255 windows-1255 x-cp1255",
        "cp1256": "cp1256 windows-1256 x-cp1256",
        "cp1257": "cp1257 windows-1257 x-cp1257",
        "cp1258": "cp1258 windows-1258 x-cp1258",
        "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
        "gbk": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
        "gb18030": "gb18030",
        "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
        "euc_jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
        "iso2022_jp": "csiso2022jp iso-2022-jp",
        "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
        "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 "
        "windows-949",
        _REPLACEMENT: "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement",
        "utf-16-be": "unicodefffe utf-16be",
        "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
        _USER_DEFINED: "x-user-defined",
    }.items()
    for label in labels.split()
}


# The codecs the guess may choose: the web's (a browser decodes with no other), never UTF-8's
# stand-ins or the labels that decode to U+FFFD.
_GUESSABLE = sorted(
    {codecs.lookup(c).name for c in _WHATWG_LABELS.values() if c not in (_REPLACEMENT, _USER_DEFINED)}
)
# How much more garbled (charset_normalizer's chaos, 0..1) the windows-1252 reading may be than the
# best guess and still be chosen.
WINDOWS_1252_MARGIN = 0.1


def web_codec(label: str) -> str | None:
    """The codec a charset label names on the web, or None when browsers do not know the label."""
    return _WHATWG_LABELS.get(label.strip(" \t\n\f\r").lower())


def _in_band_codec(label: str) -> str | None:
    """A charset named inside an ASCII-compatible body (<meta>, <?xml?>): a UTF-16 name there cannot
    be true (the bytes that spell it are ASCII), so it means UTF-8, and x-user-defined means
    windows-1252, as the HTML standard's prescan says."""
    codec = web_codec(label)
    if codec in ("utf-16-le", "utf-16-be"):
        return "utf-8"
    return "cp1252" if codec == _USER_DEFINED else codec


def decode(body: bytes, ctype: ContentType) -> tuple[str, str]:
    """The text and the charset it was decoded with (a Python codec's name)."""
    candidates: list[str | None] = []
    if ctype.charset:
        candidates.append(web_codec(ctype.charset))
    for bom, name in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if body.startswith(bom):
            candidates.insert(0, name)
    if ctype.is_html or not ctype.mime:
        m = _META_CHARSET.search(body[:4096])
        if m:
            candidates.append(_in_band_codec(m.group(1).decode("ascii")))
    if "xml" in ctype.mime or not ctype.mime:
        # An XML document names its encoding in its declaration (RSS and Atom feeds in Latin-1).
        m = _XML_ENCODING.match(body[:1024])
        if m:
            candidates.append(_in_band_codec(m.group(1).decode("ascii")))
    candidates.append("utf-8")
    for name in candidates:
        if name is None:
            continue
        if name == _REPLACEMENT:
            # Labels browsers refuse to decode (ISO-2022-KR, HZ, ...: they can hide markup): the
            # whole body is one U+FFFD, as the Encoding Standard's replacement decoder makes it.
            return ("\ufffd" if body else ""), _REPLACEMENT
        if name == _USER_DEFINED:
            return "".join(chr(b) if b < 0x80 else chr(0xF700 + b) for b in body), _USER_DEFINED
        codec = codecs.lookup(name).name
        try:
            return body.decode(codec), codec
        except UnicodeDecodeError:
            pass
        # A few invalid bytes in a page that is otherwise this charset (a stray byte, a cut
        # multi-byte character) become U+FFFD, as a browser shows them; a guess from the bytes
        # would read the whole page as some other charset instead.
        text = body.decode(codec, errors="replace")
        if text.count("\ufffd") * STRAY_BYTES_RATIO <= len(text):
            return text, f"{codec} (with replacements)"
    from charset_normalizer import from_bytes

    results = from_bytes(body[: 1 << 20], cp_isolation=_GUESSABLE)
    best = results.best()
    if best is not None:
        # windows-1252 is what a browser falls back to for undeclared legacy text; the detector only
        # overrules it when its reading is clearly less garbled. On short Western text it guessed
        # cp1006 or cp1257 ("garçon" as "garēon"), and it may pick any codec Python has, where a
        # browser only knows the web's (_GUESSABLE).
        fallback = next((r for r in results if "cp1252" in r.could_be_from_charset), None)
        if fallback is not None and fallback.chaos <= best.chaos + WINDOWS_1252_MARGIN:
            return body.decode("cp1252", errors="replace"), "cp1252"
        return body.decode(best.encoding, errors="replace"), best.encoding
    return body.decode("utf-8", errors="replace"), "utf-8 (with replacements)"


_DROP_TAGS = ["script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "canvas", "head"]


def _code_language(el: Any) -> str | None:
    """The language a code block declares: class language-X / lang-X on the <pre> or its <code>,
    or highlight-source-X on the block around it (GitHub)."""
    code = el.find("code")
    around = ("highlight-source-", "language-", "highlight-")  # GitHub; Sphinx's "highlight-python"
    parent = el.parent
    grandparent = parent.parent if parent is not None else None
    for node, prefixes in (
        (el, ("language-", "lang-")),
        (code, ("language-", "lang-")),
        (parent, around),
        (grandparent, around),
    ):
        classes = node.get("class") if node is not None and hasattr(node, "get") else None
        for c in classes or []:
            for prefix in prefixes:
                if c.startswith(prefix) and re.fullmatch(r"[A-Za-z0-9_+#.-]+", c[len(prefix) :]):
                    return c[len(prefix) :]
    return None


class ConversionTimeout(Exception):
    """The HTML conversion ran past the call's deadline, or its caller gave up on it (checked
    between parser chunks, between passes and between elements)."""


Check = Callable[[], None]


def _stopper(deadline: float | None, stop: threading.Event | None) -> Check:
    """The check the conversion makes as it goes: past ``deadline`` (a ``time.monotonic()``
    value) or once ``stop`` is set it raises ``ConversionTimeout``, so a worker thread whose
    caller has timed out (or was cancelled) stops within one chunk instead of parsing on."""

    def check() -> None:
        if (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() > deadline):
            raise ConversionTimeout

    return check


# html.parser takes the page this many characters at a time, the check made between two: a few
# tens of milliseconds of parsing each, where one feed of 10 MiB parsed for about 15 s.
PARSE_CHUNK_CHARS = 64 * 1024


def _parse(html: str, check: Check) -> Any:
    """BeautifulSoup over html.parser, fed in chunks (html.parser is incremental: a tag, entity
    or script split between two feeds is held until the next), checking between chunks."""
    from bs4 import BeautifulSoup
    from bs4.builder import HTMLParserTreeBuilder
    from bs4.builder._htmlparser import BeautifulSoupHTMLParser

    class ChunkedParser(BeautifulSoupHTMLParser):  # type: ignore[misc]
        def feed(self, data: str) -> None:
            for at in range(0, len(data), PARSE_CHUNK_CHARS):
                check()
                super().feed(data[at : at + PARSE_CHUNK_CHARS])

    class ChunkedBuilder(HTMLParserTreeBuilder):  # type: ignore[misc]
        def feed(self, markup: Any, _parser_class: Any = ChunkedParser) -> None:
            super().feed(markup, ChunkedParser)

    return BeautifulSoup(html, builder=ChunkedBuilder())


def _converter(check: Check) -> Any:
    from markdownify import MarkdownConverter

    class Converter(MarkdownConverter):  # type: ignore[misc]
        def process_tag(self, node: Any, parent_tags: Any = None) -> str:
            # Once per element: a huge page stops at the deadline instead of converting for minutes.
            check()
            return str(super().process_tag(node, parent_tags))

        def convert_td(self, el: Any, text: str, parent_tags: Any) -> str:
            # A | inside a cell would end the cell: escaped, as GFM tables require.
            return str(super().convert_td(el, text.replace("|", "\\|"), parent_tags))

        def convert_th(self, el: Any, text: str, parent_tags: Any) -> str:
            return str(super().convert_th(el, text.replace("|", "\\|"), parent_tags))

        def convert_pre(self, el: Any, text: str, parent_tags: Any) -> str:
            out = str(super().convert_pre(el, text, parent_tags))
            runs = [len(r) for r in re.findall(r"`{3,}", text)]
            if runs and out.startswith("\n\n```") and out.endswith("\n```\n\n"):
                # The code holds a ``` fence itself: a longer fence keeps the block whole.
                fence = "`" * (max(runs) + 1)
                out = f"\n\n{fence}{out[5:-5]}{fence}\n\n"
            return out

    return Converter(heading_style="ATX", bullets="-", strong_em_symbol="*", code_language_callback=_code_language)


_GUTTER_CLASSES = frozenset({"linenos", "gutter", "rouge-gutter", "line-numbers", "lineno"})


def _unwrap_numbered_code(soup: Any) -> None:
    """A code block laid out as a table of line numbers beside the code (Pygments' highlighttable,
    Rouge's gutter) becomes the code block alone: as a Markdown table it was one row of
    flattened text."""
    for table in soup.find_all("table"):
        cells = table.find_all(["td", "th"])
        gutters = [c for c in cells if _GUTTER_CLASSES & set(c.get("class") or [])]
        rest = [c for c in cells if c not in gutters]
        if gutters and len(rest) == 1 and rest[0].find("pre") is not None:
            table.replace_with(rest[0].find("pre"))


def _shorten_inline_data(value: str) -> str | None:
    """A long data: URL shortened to its media type and size; None when it is short enough."""
    if len(value) <= limits.WEBFETCH_INLINE_DATA_CHARS:
        return None
    head = value.split(",", 1)[0][:64]
    return f"{head},...({len(value)}-characters-of-inline-data-omitted)"


_FENCE = re.compile(r"[ \t]*(`{3,})")


def _tidy(text: str) -> str:
    """Trailing blanks dropped and blank lines collapsed to one — outside code blocks only: inside
    one every line is the page's (Python's two blank lines between functions stay two)."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            if re.fullmatch(rf"[ \t]*`{{{len(fence)},}}[ \t]*", line):
                fence = None
            out.append(line)
            continue
        line = line.rstrip(" \t")
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
        elif not line and out and not out[-1]:
            continue
        out.append(line)
    return "\n".join(out)


# Elements nested deeper than this are flattened to their text before the conversion, which
# recurses once per level (markdownify): a page of 400 unclosed <b>, <p> or <li> tags (old hand-
# written HTML, or a hostile page) failed with RecursionError. Real pages nest a few dozen deep.
MAX_HTML_DEPTH = 128


def _bound_depth(soup: Any) -> None:
    """Every element at ``MAX_HTML_DEPTH`` keeps its text (words separated by a space) and loses the
    elements inside it. Iterative: the walk itself never recurses."""
    from bs4 import Tag

    stack: list[tuple[Any, int]] = [(soup, 0)]
    while stack:
        node, depth = stack.pop()
        for child in node.contents:
            if not isinstance(child, Tag):
                continue
            if depth + 1 >= MAX_HTML_DEPTH and any(isinstance(c, Tag) for c in child.contents):
                child.string = child.get_text(" ")
            else:
                stack.append((child, depth + 1))


def html_to_markdown(
    html: str, base_url: str | None = None, deadline: float | None = None, stop: threading.Event | None = None
) -> str:
    """Readable Markdown; relative links and images are made absolute against ``base_url``.
    Past ``deadline`` (a ``time.monotonic()`` value), or once ``stop`` is set, it raises
    ``ConversionTimeout`` — from the parse too, which is fed in chunks."""
    from urllib.parse import urljoin

    from bs4 import Comment, Declaration, Doctype, ProcessingInstruction

    check = _stopper(deadline, stop)
    soup = _parse(html, check)
    check()
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    base = soup.find("base", href=True)
    if base_url and base is not None and isinstance(base.get("href"), str):
        # Relative links resolve against the page's <base href> when it has one (HTML's rule).
        try:
            joined = urljoin(base_url, base["href"].strip())
        except ValueError:
            joined = ""
        if joined.lower().startswith(("http://", "https://")):
            base_url = joined
    for tag in soup(_DROP_TAGS):
        tag.decompose()
    check()
    _bound_depth(soup)  # before any pass that walks each table's (or element's) whole subtree
    check()
    _unwrap_numbered_code(soup)
    check()
    for a in soup.find_all("a", class_="headerlink"):
        a.decompose()  # Sphinx / MkDocs "¶" permalinks beside every heading
    for node in soup.find_all(string=lambda s: isinstance(s, Comment | Declaration | Doctype | ProcessingInstruction)):
        node.extract()  # <?xml ...?>, <!DOCTYPE>, comments: not page text
    check()
    for tag, attr in (("a", "href"), ("img", "src")):
        for el in soup.find_all(tag):
            value = el.get(attr)
            if not isinstance(value, str) or not value:
                continue
            if value[:5].lower() == "data:":
                short = _shorten_inline_data(value)
                if short is not None:
                    el[attr] = short
            elif base_url and not value.startswith(("#", "javascript:")):
                try:
                    el[attr] = urljoin(base_url, value)
                except ValueError:
                    pass
    check()
    text = _tidy(_converter(check).convert_soup(soup)).strip()
    if title and not text.startswith("# "):
        text = f"# {title}\n\n{text}"
    return text + "\n"


def error_excerpt(body: bytes, ctype: ContentType, url: str, limit: int) -> str:
    """The start of an HTTP error's body as text (HTML as Markdown), at most ``limit`` characters;
    empty for an empty or binary body."""
    if not body.strip() or sniff(body[:8192]) is not None:
        return ""
    text, _ = decode(body, ctype)
    if ctype.is_html:
        text = html_to_markdown(text, url)
    text = text.strip()
    if len(text) > limit:
        text = f"{text[:limit]}\n[... the rest of the body is not shown]"
    return text

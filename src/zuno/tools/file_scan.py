"""How file tools read. A mutation's pre-read of the current bytes (never a wait on a FIFO, never
through a link). For read, one bounded, streamed pass over a file: the SHA-256 and size of every
byte (for the read receipt), the line count (for the footer), the first bytes (to tell binary
from text), and only the lines of the requested window — never the whole file. Both run in a
worker thread; a cancelled call stops a scan at the next chunk.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from zuno import limits, safefs
from zuno.declarations import BlockKind
from zuno.errors import Refused

_T = TypeVar("_T")

# What a file's first bytes say it is, for read to name the right tool.
IMAGE_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "PNG"),
    (b"\xff\xd8\xff", 0, "JPEG"),
    (b"GIF87a", 0, "GIF"),
    (b"GIF89a", 0, "GIF"),
    (b"WEBP", 8, "WebP"),
    (b"II*\x00", 0, "TIFF"),
    (b"MM\x00*", 0, "TIFF"),
    (b"BM", 0, "BMP"),
    (b"ftypheic", 4, "HEIC"),
    (b"ftypavif", 4, "AVIF"),
)


def image_format(head: bytes) -> str | None:
    for magic, at, name in IMAGE_MAGIC:
        if head[at : at + len(magic)] == magic and (name != "WebP" or head[:4] == b"RIFF"):
            return name
    return None


class ScanCancelled(Exception):
    pass


@dataclass(slots=True)
class Row:
    number: int  # 1-based line number
    text: str  # decoded, without the terminator (the LF, or a CRLF's one CR)
    length: int  # the line's real length in bytes (more than held when it was cut)
    cut: bool = False


@dataclass(slots=True)
class Scan:
    size: int = 0
    sha256: str = ""
    lines: int = 0
    head: bytes = b""
    rows: list[Row] = field(default_factory=list)
    # The file holds U+240D (read's sign for a lone CR) itself; searched for only while it matters:
    # before the window is read, and after it when a row of it holds a lone CR.
    cr_symbol: bool = False


# read's sign for a lone CR, U+240D (``textfile.CR_SHOWN``; that package imports this module).
_CR_SHOWN_BYTES = b"\xe2\x90\x8d"

# What read's note on a cut row ("[... line N is L bytes; read holds its first H. ...]") may take.
CUT_NOTE_BYTES = 160


def scan_window(
    fd: int, start: int, want: int, budget: int, stop: threading.Event, *, hold: int = limits.READ_LINE_HOLD_BYTES
) -> Scan:
    """Stream fd to its end. Lines start..start+want-1 are kept while their rendered rows
    (``<number>\\t<text>``, numbers padded to the widest possible) fit in ``budget`` bytes; the
    first row is always kept, at most ``hold`` bytes of it."""
    h = hashlib.sha256()
    out = Scan()
    head = bytearray()
    last_line = start + want - 1
    width = len(str(last_line))
    used = 0
    done = False
    cur = 1  # the line the next byte belongs to
    held = bytearray()
    real = 0
    last = b""
    look_for_symbol = True  # whether cr_symbol may still matter (see below)

    def finish(at_break: bool = True) -> None:
        nonlocal used, done, held, real
        text = bytes(held).decode("utf-8", "replace")
        cut = real > len(held)
        if not cut and at_break:
            text = text.removesuffix("\r")  # a CRLF's CR only: "x\r\r\n" is the line "x\r" to edit
        cost = width + 1 + len(text.encode()) + 1 + (CUT_NOTE_BYTES if cut else 0)
        if out.rows and used + cost > budget:
            done = True
        else:
            out.rows.append(Row(cur, text, real, cut))
            used += cost
            if cur >= last_line:
                done = True
        held = bytearray()
        real = 0

    while True:
        if stop.is_set():
            raise ScanCancelled
        chunk = os.read(fd, limits.FILE_READ_CHUNK)
        if not chunk:
            break
        h.update(chunk)
        out.size += len(chunk)
        if look_for_symbol and not out.cr_symbol:  # no copy of the chunk: it and its seam with the last
            out.cr_symbol = _CR_SHOWN_BYTES in chunk or _CR_SHOWN_BYTES in last + chunk[:2]
        last = chunk[-2:]
        if len(head) < limits.READ_BINARY_SNIFF_BYTES:
            head += chunk[: limits.READ_BINARY_SNIFF_BYTES - len(head)]
        if done:
            # cr_symbol matters only for rows holding a lone CR: once the window is read without
            # one, the rest of a large file is not searched for the sign (it cost 40% of the scan).
            look_for_symbol = look_for_symbol and any("\r" in row.text for row in out.rows)
            cur += chunk.count(b"\n")
            continue
        i, n = 0, len(chunk)
        while True:
            if cur < start:  # before the window: skip to the next line break, or past the chunk
                rest = chunk.count(b"\n", i)
                if cur + rest < start:
                    cur += rest
                    break
                k = start - cur  # the window starts inside this chunk, after k more line breaks
                i = n - len(chunk[i:].split(b"\n", k)[-1])
                cur += k
                continue
            j = chunk.find(b"\n", i)
            seg_end = j if j >= 0 else n
            real += seg_end - i
            room = hold - len(held)
            if room > 0:
                held += chunk[i : min(seg_end, i + room)]
            if j < 0:
                break
            finish()
            cur += 1
            i = j + 1
            if done:
                cur += chunk.count(b"\n", i)
                break
    if out.size and last[-1:] != b"\n":
        out.lines = cur
        if not done and start <= cur:
            finish(at_break=False)  # the last line has no break: a CR it ends with is its text
    else:
        out.lines = cur - 1
    out.sha256 = h.hexdigest()
    out.head = bytes(head)
    return out


async def in_thread(fn: Callable[[threading.Event], _T]) -> _T:
    """Run blocking file work off the event loop; cancelling the call asks it to stop."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(fn, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


def read_current(where: safefs.Target) -> tuple[bytes | None, os.stat_result | None]:
    """A mutation's pre-read: the file's bytes and status, or (None, None) when nothing is there.
    A directory raises IsADirectoryError, a FIFO, device or socket safefs.NotRegular, a parent
    that is a file NotADirectoryError — never a wait on a FIFO."""
    try:
        fd = safefs.open_regular(where)
    except FileNotFoundError:
        return None, None
    try:
        st = os.fstat(fd)
        chunks = []
        while chunk := os.read(fd, limits.FILE_READ_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def not_a_file(shown: str, e: OSError, rule: str) -> str:
    """The message for a path that names no regular file (or whose write failed)."""
    if isinstance(e, IsADirectoryError):
        return f"{shown} is a directory, not a regular file; {rule}."
    if isinstance(e, safefs.NotRegular):
        return f"{shown} is {e.what}, not a regular file; {rule}."
    if isinstance(e, NotADirectoryError):
        return f"a parent of {shown} ({e.filename}) is a file, not a directory; {rule}."
    return f"{shown}: {e.strerror or e}; {rule}."


def digest_current(where: safefs.Target) -> tuple[str, int, os.stat_result] | None:
    """Like read_current, for a mutation that replaces or removes the whole file and so needs only
    the current bytes' SHA-256 and size: streamed, never held. None when nothing is there."""
    try:
        fd = safefs.open_regular(where)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        h = hashlib.sha256()
        size = 0
        while chunk := os.read(fd, limits.FILE_READ_CHUNK):
            h.update(chunk)
            size += len(chunk)
        return h.hexdigest(), size, st
    finally:
        os.close(fd)


def refuse_directory_name(raw: str, field: str, rule: str) -> None:
    """A path that ends with '/' names a directory; a tool that expects a file refuses it rather
    than create a file of that name."""
    if raw.endswith("/") and raw.strip("/"):
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {raw!r} ends with '/', so it names a directory; {rule}. "
            "Name the file without a trailing '/'.",
        )


def normalization_twin(where: safefs.Target) -> str | None:
    """The name of a sibling that differs from the target's only in Unicode normalisation (an NFD
    'cafe\\u0301.txt' beside an NFC 'café.txt': one name to the eye, two files to Linux), or None.
    None also when the parent cannot be listed."""
    if not where.parts:
        return None
    name = where.name
    if name.isascii():
        return None
    want = unicodedata.normalize("NFC", name)
    try:
        entries = safefs.listdir(safefs.Target(where.root, where.parts[:-1], where.field))
    except (OSError, Refused):
        return None
    return next((n for n, _ in entries if n != name and unicodedata.normalize("NFC", n) == want), None)


def twin_note(shown: str, twin: str) -> str:
    """The sentence that names a normalisation twin as a call can take it (JSON-escaped)."""
    parent = shown.rsplit("/", 1)[0] + "/" if "/" in shown else ""
    return (
        f"a file named {json.dumps(parent + twin)} exists, which looks the same as {json.dumps(shown)} but is "
        "spelled with other Unicode code points (another normalisation form); name it exactly as shown to reach it"
    )


def links_note(w: safefs.Written) -> str:
    """A sentence for a result about a rewritten file with hard links (empty for one name)."""
    if w.links <= 1:
        return ""
    if w.in_place:
        return f" It has {w.links} hard links: rewritten in place, so every name shows the new content."
    return (
        f" Note: it had {w.links} hard links; it was replaced by a new file, so the other "
        f"{w.links - 1} name(s) keep the old content."
    )


def links_metadata(w: safefs.Written) -> dict[str, object]:
    """``hardLinks`` / ``inPlace`` for a rewritten file with more than one name (nothing else)."""
    return {"hardLinks": w.links, "inPlace": w.in_place} if w.links > 1 else {}

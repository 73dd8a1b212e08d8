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
from zuno.tools import control_pictures

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
    kept: int = 0  # when cut: how many of its bytes ``text`` holds


@dataclass(slots=True)
class Scan:
    size: int = 0
    sha256: str = ""
    lines: int = 0
    head: bytes = b""
    rows: list[Row] = field(default_factory=list)
    # The control pictures (U+240D, read's sign for a lone CR; U+241B for ESC; ...) the file holds
    # itself; searched for only while they matter: before the window is read, and after it only
    # for the pictures of controls its rows hold, until those are found.
    pictures: set[str] = field(default_factory=set)
    controls: bool = False  # a row may hold a control read shows as a picture (a lone CR, an ESC, ...)

    @property
    def cr_symbol(self) -> bool:
        return control_pictures.CR_SHOWN in self.pictures

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
    wanted: set[str] | None = None  # once the window is read: the pictures still worth looking for
    # What this chunk holds (found once a row takes from it): 0 no control, 1 CRs only as parts of
    # CRLFs, 2 a lone CR or another control (shown as pictures, three bytes each).
    flagged: int | None = None
    held_controls = 0  # the most of that over the chunks the held bytes are from

    def finish(at_break: bool = True) -> None:
        nonlocal used, done, held, real, held_controls
        text = bytes(held).decode("utf-8", "replace")
        cut = real > len(held)
        kept = len(held)
        if not held_controls:
            size = len(text.encode())
        elif held_controls == 1:  # the only CR a CRLF's
            if not cut and at_break:
                text = text.removesuffix("\r")
            size = len(text.encode())
        else:  # controls shown as three-byte pictures
            text, cut, kept, size = _with_controls(held, text, cut, at_break, hold)
            out.controls = True
        cost = width + 1 + size + 1 + (CUT_NOTE_BYTES if cut else 0)
        if out.rows and used + cost > budget:
            done = True
        else:
            out.rows.append(Row(cur, text, real, cut, kept))
            used += cost
            if cur >= last_line:
                done = True
        held = bytearray()
        real = 0
        held_controls = flagged or 0  # the next row's bytes are from this chunk

    while True:
        if stop.is_set():
            raise ScanCancelled
        chunk = os.read(fd, limits.FILE_READ_CHUNK)
        if not chunk:
            break
        h.update(chunk)
        out.size += len(chunk)
        if (wanted is None or wanted) and (b"\xe2" in chunk or b"\xe2" in last):  # a memchr first
            _find_pictures(chunk, last, out.pictures)
            if wanted:
                wanted -= out.pictures
        last = chunk[-2:] if len(chunk) > 1 else (last + chunk)[-2:]  # a picture may span three reads
        if len(head) < limits.READ_BINARY_SNIFF_BYTES:
            head += chunk[: limits.READ_BINARY_SNIFF_BYTES - len(head)]
        if done:
            # A picture matters only for rows holding its control: once the window is read, the
            # rest of a large file is searched only for the pictures of its rows' controls, until
            # they are found (a search of every chunk cost 40% of the scan).
            if wanted is None:
                wanted = _shown_pictures(out.rows) - out.pictures
            cur += chunk.count(b"\n")
            continue
        i, n = 0, len(chunk)
        flagged = None
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
                if flagged is None:  # once a chunk, and only when rows take from it: C passes
                    others = chunk.translate(None, control_pictures.NOT_CONTROL_BUT_CR_BYTES)
                    if others or b"\r" not in chunk:
                        flagged = 2 if others else 0
                    else:  # a CR at the chunk's end counts as lone: its LF is not in this chunk
                        flagged = 1 if chunk.count(b"\r") == chunk.count(b"\r\n") else 2
                    held_controls = max(held_controls, flagged) if held else flagged
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


def _with_controls(held: bytearray, text: str, cut: bool, at_break: bool, hold: int) -> tuple[str, bool, int, int]:
    """A row that may hold controls: its text without a CRLF's CR, cut where its shown text (each
    control a three-byte picture) reaches ``hold`` bytes; the text, whether it is cut, how many of
    the line's bytes it holds, and its shown size in bytes."""
    kept = len(held)
    controls = len(held.translate(None, control_pictures.NOT_CONTROL_BYTES))
    if not cut and at_break and text.endswith("\r"):
        text = text[:-1]  # a CRLF's CR only: "x\r\r\n" is the line "x\r" to edit
        controls -= 1
    size = len(text.encode())
    if controls and size + 2 * controls > hold:  # cut where the shown text reaches hold bytes
        kept = _shown_prefix(held, hold)
        text = bytes(held[:kept]).decode("utf-8", "replace")
        cut = True
        size = len(text.encode())
        controls = len(held[:kept].translate(None, control_pictures.NOT_CONTROL_BYTES))
    return text, cut, kept, size + 2 * controls


def _find_pictures(chunk: bytes, last: bytes, into: set[str]) -> None:
    """Add the control pictures in ``chunk`` and in its seam with the chunk before (whose last two
    bytes are ``last``) to ``into``: a C search for their common lead, no copy of the chunk."""
    seam = last + chunk[:2]
    lead = control_pictures.PICTURE_LEAD
    # b"\xe2" first: a memchr, and absent from most code (ASCII); the two-byte search is slower
    whole = lead[:1] in chunk and lead in chunk
    for part in (chunk, seam) if whole else (seam,):
        if control_pictures.PICTURE_LEAD in part:
            into.update(map(control_pictures.picture_of_byte, b"".join(control_pictures.PICTURE_BYTES.findall(part))))


def _shown_pictures(rows: list[Row]) -> set[str]:
    """The pictures of the controls the rows hold (a row's lone CR included)."""
    found = set(control_pictures.CONTROLS.findall("".join(row.text for row in rows)))
    return {control_pictures.PICTURE[c] for c in found}


_CODE_SET = frozenset(control_pictures.CODES)


def _shown_prefix(held: bytearray, hold: int) -> int:
    """How many of ``held``'s bytes fit in ``hold`` bytes once each control is a three-byte picture
    (backed off to the start of a UTF-8 character): counted 4 KiB at a time, then byte by byte."""
    size = i = 0
    step = 4096
    while i + step <= len(held):
        more = step + 2 * len(held[i : i + step].translate(None, control_pictures.NOT_CONTROL_BYTES))
        if size + more > hold:
            break
        size += more
        i += step
    while i < len(held):
        size += 3 if held[i] in _CODE_SET else 1
        if size > hold:
            break
        i += 1
    else:
        return len(held)
    while i > 0 and 0x80 <= held[i] < 0xC0:
        i -= 1
    return i


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

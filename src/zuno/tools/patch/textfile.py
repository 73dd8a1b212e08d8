"""Logical lines over original bytes.

A file is decoded into logical lines (text without its terminator) and, per line, the exact
terminator it had ("\\n", "\\r\\n", or "" for a last line without a final newline). Matching and
replacing happen on logical lines; encoding puts every untouched line back with its own
terminator, gives a replaced line the terminator of the line it replaces (``replaced_eols``)
and other new lines the file's dominant style, keeps the BOM and the final-newline
state. Bytes that are not UTF-8 survive through ``surrogateescape``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from zuno import limits
from zuno.tools import control_pictures

BOM = b"\xef\xbb\xbf"
LF = "\n"
CRLF = "\r\n"
# How read shows a lone CR (text inside a line, not a line break): U+240D SYMBOL FOR CARRIAGE
# RETURN, so that no terminal or log showing the row returns to its start and overwrites it; the
# other C0 controls but TAB likewise (``control_pictures``). In a file that holds no such picture
# itself, edit and apply_patch take it back as its control (``from_shown``).
CR_SHOWN = control_pictures.CR_SHOWN

# Byte-order marks of the text encodings whose text holds NUL bytes (UTF-32 first: its LE mark
# starts with UTF-16 LE's).
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)


def wide_encoding(head: bytes) -> str | None:
    """The UTF-16/UTF-32 encoding a file's byte-order mark names, or None."""
    return next((name for mark, name in WIDE_BOMS if head.startswith(mark)), None)


def not_text(data: bytes) -> str | None:
    """What a file is when it is not text that edit and apply_patch can change line by line: read
    refuses the same files (a NUL byte in the first bytes it sniffs), so a model never saw their
    lines, and text put into them would be UTF-8 in a UTF-16 file or in a binary one. None for text."""
    head = data[: limits.READ_BINARY_SNIFF_BYTES]
    wide = wide_encoding(head)
    if wide is not None:
        return f"{wide} text, not UTF-8"
    if b"\x00" in head:
        return "a binary file (it holds NUL bytes)"
    return None


@dataclass(slots=True)
class TextFile:
    bom: bool
    lines: list[str]
    eols: list[str]  # one per line; only the last may be ""
    style: str  # the terminator new lines take

    @property
    def final_newline(self) -> bool:
        """Whether the file ends with a line terminator (an empty file counts as yes: lines added
        to an empty file end with one)."""
        return not self.eols or self.eols[-1] != ""


def decode(data: bytes) -> TextFile:
    bom = data.startswith(BOM)
    if bom:
        data = data[len(BOM) :]
    text = data.decode("utf-8", "surrogateescape")
    parts = text.split("\n")
    last = parts.pop()  # text after the final "\n" ("" when the file ends with a newline)
    if "\r" not in text:  # the common case, without a per-line loop
        eols = [LF] * len(parts)
        if last:
            parts.append(last)
            eols.append("")
        return TextFile(bom, parts, eols, LF)
    lines: list[str] = []
    eols: list[str] = []
    crlf = 0
    for part in parts:
        if part.endswith("\r"):
            lines.append(part[:-1])
            eols.append(CRLF)
            crlf += 1
        else:
            lines.append(part)
            eols.append(LF)
    if last:
        lines.append(last)
        eols.append("")
    style = CRLF if crlf * 2 > len(parts) else LF
    return TextFile(bom, lines, eols, style)


def taken_pictures(old: str, text: str) -> set[str]:
    """The control pictures in ``old`` (text copied from read) that stand for their controls: those
    ``text`` (the file's) does not hold itself, where read showed the control as its picture."""
    return {p for p in control_pictures.pictures_in(old) if p not in text}


def from_shown(text: str, pictures: set[str]) -> str:
    """Text copied from read's rows with each of ``pictures`` (a lone CR's U+240D, an ESC's U+241B,
    ...) back as the control it stands for."""
    return control_pictures.from_shown(text, pictures)


def replaced_eols(old: list[str], added: int) -> list[str | None]:
    """Terminators for the ``added`` lines that replace lines whose own terminators were ``old``
    (one replacement: a run of removed and added lines, or an edit's old text and new text): the
    last new line takes the last old line's, the others pair with the old lines in order, and a
    new line with no old line of its own gets None (the file's dominant style). With as many new
    lines as old ones, every replaced line keeps its own terminator. apply_patch and edit both use
    this, so in a mixed LF/CRLF file the same change gives the same bytes through either tool."""
    if not added or not old:
        return [None] * added
    head = [old[i] if i < len(old) - 1 else None for i in range(added - 1)]
    return [*head, old[-1]]


def finalize(lines: list[str], eols: list[str | None], style: str, final_newline: bool) -> list[str]:
    """Terminators for an edited line list: an original line keeps its own, a new line (None)
    takes the style, and the last line follows the file's final-newline state."""
    out = [e or style for e in eols]
    if out:
        out[-1] = (eols[-1] or style) if final_newline else ""
    return out


def encode(bom: bool, lines: list[str], eols: list[str]) -> bytes:
    if len(lines) != len(eols):
        raise ValueError("one terminator per line")
    n = len(lines)
    lf = eols.count(LF)
    if lf == n:
        body = "\n".join(lines) + "\n" if n else ""
    elif lf == n - 1 and eols[-1] == "":
        body = "\n".join(lines)
    else:
        body = "".join(map(operator.add, lines, eols))
    return (BOM if bom else b"") + body.encode("utf-8", "surrogateescape")


def encode_text(text: str) -> bytes | None:
    """UTF-8 bytes of model-given text, or None when it holds a lone surrogate that is no byte."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None

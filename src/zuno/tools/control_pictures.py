"""How read and grep show the C0 control characters a line holds, and how edit and apply_patch
take them back.

A control character sent raw can act on whatever shows the text: an ESC sequence recolours or
rewrites a terminal's screen, a backspace or a lone CR overwrites what came before it. read and
grep show every C0 control but TAB and LF (which are layout, and LF is the line break) as its
Unicode control picture, U+2400 + its code (ESC as U+241B, NUL as U+2400, a lone CR as U+240D).
A file that holds a picture itself gets that control raw in read (the picture could not stand
for it there), and edit / apply_patch take a picture in old text back as its control only when
the file does not hold that picture. This module imports nothing of Zuno: every tool can use it.
"""

from __future__ import annotations

import re

# The C0 controls shown as pictures: all but TAB (0x09) and LF (0x0A).
CODES = tuple(c for c in range(0x20) if c not in (0x09, 0x0A))
_NAMES = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS TAB LF VT FF CR SO SI "
    "DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
).split()
PICTURE = {chr(c): chr(0x2400 + c) for c in CODES}  # control -> picture
CONTROL = {p: c for c, p in PICTURE.items()}  # picture -> control
CR_SHOWN = PICTURE["\r"]  # U+240D SYMBOL FOR CARRIAGE RETURN
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f]")
PICTURES = re.compile("[\u2400-\u2408\u240b-\u241f]")
# Every picture is E2 90 xx in UTF-8 (xx = 0x80 + the control's code): a file is searched for the
# two-byte lead first (a C search, no copy), then for the pictures where it occurs.
PICTURE_LEAD = b"\xe2\x90"
PICTURE_BYTES = re.compile(b"\xe2\x90([\x80-\x88\x8b-\x9f])")
# The bytes that are not shown controls, for counting the controls of a byte string with
# ``bytes.translate(None, NOT_CONTROL_BYTES)``.
NOT_CONTROL_BYTES = bytes(b for b in range(256) if b not in CODES)
NOT_CONTROL_BUT_CR_BYTES = bytes(b for b in range(256) if b not in CODES or b == 0x0D)
_ALL = str.maketrans(PICTURE)


def picture_of_byte(last: int) -> str:
    """The picture whose UTF-8 form ends in ``last`` (a PICTURE_BYTES group)."""
    return chr(0x2400 + last - 0x80)


def name(control: str) -> str:
    """A control as the footers name it: ``ESC (0x1B)``."""
    return f"{_NAMES[ord(control)]} (0x{ord(control):02X})"


def to_shown(text: str, raw: frozenset[str] | set[str] = frozenset()) -> str:
    """``text`` with each shown control as its picture, except the controls whose picture is in
    ``raw`` (a file holding the picture itself): those stay as they are."""
    if not raw:
        return text.translate(_ALL)
    return text.translate({ord(c): p for c, p in PICTURE.items() if p not in raw})


def pictures_in(text: str) -> set[str]:
    return set(PICTURES.findall(text))


def from_shown(text: str, pictures: set[str] | frozenset[str]) -> str:
    """Text copied from read's rows with each of ``pictures`` back as the control it stands for."""
    if not pictures:
        return text
    return text.translate({ord(p): CONTROL[p] for p in pictures})

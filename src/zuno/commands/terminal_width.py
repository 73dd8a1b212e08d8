"""How many terminal rows a line of printed text occupies, or None when that cannot be known.

A cell-by-cell model of a terminal with auto-wrap, starting at column 0: a wide (East Asian
Wide/Fullwidth) character takes two cells and wraps early when only one is left; combining marks
take none. East Asian Ambiguous characters (``—``, ``•``, ``─``) are one cell on most terminals and
two on some: the rows are counted both ways and known only when both counts agree (a line shorter
than the terminal). Characters without an agreed width at all (variation selectors, zero-width
joiners and other format characters, unassigned code points, tabs) make the answer unknown, and the
caller must not move the cursor over rows it cannot count.
"""

from __future__ import annotations

import unicodedata


def char_width(ch: str, ambiguous: int = 1) -> int | None:
    """Cells one printed character takes (0, 1 or 2; ``ambiguous`` for East Asian Ambiguous), or
    None when it has no agreed width."""
    if ch == "\t" or ch == "\u200d" or "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef":
        return None
    category = unicodedata.category(ch)
    if category in ("Cc", "Cf", "Cn", "Cs", "Co"):
        return None
    if category in ("Mn", "Me"):
        return 0
    eaw = unicodedata.east_asian_width(ch)
    if eaw in ("W", "F"):
        return 2
    if eaw == "A":
        return ambiguous
    return 1


def rows_used(text: str, columns: int) -> int | None:
    """Rows ``text`` (no newline, no escape sequences) occupies when printed from column 0 on a
    terminal ``columns`` wide; None when a character's width is uncertain."""
    if columns < 2:
        return None
    narrow, wide = _rows(text, columns, 1), _rows(text, columns, 2)
    return narrow if narrow == wide else None


def _rows(text: str, columns: int, ambiguous: int) -> int | None:
    row, col = 0, 0  # col == columns: the cursor waits at the last column (pending wrap)
    for ch in text:
        w = char_width(ch, ambiguous)
        if w is None:
            return None
        if w and col + w > columns:
            row, col = row + 1, 0
        col += w
    return row + 1

"""What a chunk that does not match says next: a retry without a trailing blank context line that
stands for the file's final newline (accepted only when unambiguous), where the longest run
of the chunk's first lines does occur (to point the re-read), whether its lines carry the
``<number>\t`` prefixes of read's rows (copied along with the text), and whether they copy read's
U+FFFD for bytes of the file that are not UTF-8."""

from __future__ import annotations

import re
from dataclasses import replace

from zuno.tools.patch.grammar import Chunk
from zuno.tools.patch.matcher import Matcher


def without_final_blank(
    matcher: Matcher, chunk: Chunk, region: int, unique: bool
) -> tuple[Chunk, list[int], int] | None:
    """A chunk whose last line is a blank context line that stands for the file's final newline
    (a common habit of patch writers): retried without it, and accepted only when that is
    unambiguous — the rest of the chunk then ends exactly at the file's last line, and (for a chunk
    without an anchor) occurs nowhere else. The file keeps its own final-newline state."""
    if not chunk.ops or chunk.ops[-1] != ("ctx", "") or len(chunk.old) < 2:
        return None
    trimmed = replace(chunk, ops=chunk.ops[:-1])
    old = trimmed.old
    at_end, level = matcher.find(old, region, at_end=True)
    if not at_end:
        return None
    if unique:
        anywhere, _ = matcher.find(old, region, want=2)
        if len(anywhere) != 1:
            return None
    else:
        first, _ = matcher.find(old, region)
        if first != at_end:
            return None
    return trimmed, at_end, level


def closest(matcher: Matcher, old: list[str], start: int) -> tuple[str, int]:
    """Where the longest run of the chunk's first lines does occur, to point the re-read:
    (text, 0-based line of the first differing line, or -1)."""
    best_n, best_at = 0, -1
    for n in range(min(len(old), 8), 0, -1):
        at, _ = matcher.find(old[:n], start)
        if at:
            best_n, best_at = n, at[0]
            break
    if best_n == 0:
        return "; none of its first lines occurs there", -1
    return f"; its first {best_n} line(s) occur at line {best_at + 1}, the next line differs", best_at + best_n


_READ_ROW = re.compile(r"^ *\d+(?:\t|$)")

READ_ROWS_HINT = (
    "; its lines start with read's line numbers ({first!r} and a tab), which are not part of the file: "
    "copy only the text after the tab"
)


def without_read_rows(lines: list[str]) -> list[str] | None:
    """The lines without read's row prefixes (``  12\t``), when every line carries one; else None."""
    if not any("\t" in ln for ln in lines) or not all(ln == "" or _READ_ROW.match(ln) for ln in lines):
        return None
    return [ln.split("\t", 1)[1] if "\t" in ln else "" for ln in lines]


_RAW_BYTE = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape decodes it

NOT_UTF8_HINT = (
    "; the file holds bytes that are not UTF-8, which read shows as U+FFFD ('\ufffd') and no text you send can "
    "name: anchor on the lines around them, or change those bytes with shell (iconv, sed), which works on bytes"
)


def copies_undecodable(old: list[str], lines: list[str]) -> bool:
    """Whether the old lines carry U+FFFD where the file has bytes that are not UTF-8."""
    return any("\ufffd" in ln for ln in old) and any(_RAW_BYTE.search(ln) for ln in lines)


def copied_wrong(old: list[str], lines: list[str], start: int) -> str:
    """The hints for a chunk whose lines were copied out of read with what is not in the file:
    read's line-number prefixes (named only when the text after them is there), or U+FFFD for
    bytes that are not UTF-8."""
    hint = ""
    bare = without_read_rows(old)
    if bare is not None and Matcher(lines, set(bare)).find(bare, start)[0]:
        hint += READ_ROWS_HINT.format(first=old[0].split("\t", 1)[0].strip())
    if copies_undecodable(old, lines):
        hint += NOT_UTF8_HINT
    return hint

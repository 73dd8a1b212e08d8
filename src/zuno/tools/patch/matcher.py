"""Finding a chunk's old lines in a file's logical lines, in time linear in the file.

Each tolerance level maps a line to a key: exact, then trailing whitespace ignored, then
surrounding whitespace ignored, then typographic punctuation folded to ASCII (what models most
often retype). A level's index (key -> sorted positions) is built on first use, so a patch of
many chunks costs one pass over the file per level it needs, and each chunk is placed by looking
only at the positions of its rarest line.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

_PUNCT = str.maketrans(
    {
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00a0": " ",
        "\u2002": " ",
        "\u2003": " ",
        "\u2009": " ",
        "\u202f": " ",
        "\u3000": " ",
        "\u2026": "...",
    }
)

LEVELS: list[Callable[[str], str]] = [
    lambda s: s,
    str.rstrip,
    str.strip,
    lambda s: s.strip().translate(_PUNCT),
]
LEVEL_NAMES = ["exact", "trailing-whitespace", "surrounding-whitespace", "punctuation"]


class Matcher:
    def __init__(self, lines: list[str], wanted: set[str] | None = None) -> None:
        """``wanted``: every line text a caller may look up (the chunks' old lines and anchors);
        the indexes then hold only those, which keeps a big file's pass cheap."""
        self.lines = lines
        self.wanted = wanted
        self._index: dict[int, dict[str, list[int]]] = {}
        self._keys: dict[int, list[str]] = {}

    def _level(self, level: int) -> tuple[dict[str, list[int]], list[str]]:
        idx = self._index.get(level)
        if idx is None:
            key = LEVELS[level]
            keys = self.lines if level == 0 else [key(s) for s in self.lines]
            idx = {}
            if self.wanted is None:
                for i, k in enumerate(keys):
                    bucket = idx.get(k)
                    if bucket is None:
                        idx[k] = [i]
                    else:
                        bucket.append(i)
            else:
                wanted = {key(s) for s in self.wanted}
                for i in [i for i, k in enumerate(keys) if k in wanted]:
                    k = keys[i]
                    bucket = idx.get(k)
                    if bucket is None:
                        idx[k] = [i]
                    else:
                        bucket.append(i)
            self._index[level] = idx
            self._keys[level] = keys
        return idx, self._keys[level]

    def find(self, seq: list[str], start: int, *, at_end: bool = False, want: int = 1) -> tuple[list[int], int]:
        """Positions (at most ``want``) where ``seq`` occurs at or after ``start``, at the first
        tolerance level that finds any; returns (positions, level). ``at_end``: only at the end."""
        n, m = len(self.lines), len(seq)
        if m == 0 or m > n - start:
            return [], -1
        for level, key in enumerate(LEVELS):
            idx, keys = self._level(level)
            want_keys = [key(s) for s in seq]
            if at_end:
                p = n - m
                if p >= start and keys[p:n] == want_keys:
                    return [p], level
                continue
            # Anchor on the rarest line of the chunk.
            best_k, best = -1, None
            for k, wk in enumerate(want_keys):
                bucket = idx.get(wk)
                if bucket is None:
                    best = None
                    best_k = -2
                    break
                if best is None or len(bucket) < len(best):
                    best, best_k = bucket, k
            if best is None:
                continue
            found: list[int] = []
            for pos in best[bisect.bisect_left(best, start + best_k) :]:
                s = pos - best_k
                if s + m > n:
                    break
                if keys[s : s + m] == want_keys:
                    found.append(s)
                    if len(found) >= want:
                        break
            if found:
                return found, level
        return [], -1

"""The glob collector against a straightforward reading of the same ``rg --files --null`` output:
whatever the chunking (pieces of a few bytes, chunks larger than the collector's own pieces), it
keeps exactly the first ``cap`` nameable paths in byte order and counts every path, with names
that are prefixes of each other, equal to the kept threshold, not ASCII or not UTF-8."""

from __future__ import annotations

import random

import pytest

from zuno.tools.search import glob_collect
from zuno.tools.search.glob_collect import GlobCollector

STEMS = [b"a", b"a/b", b"a/b/c", b"ab", b"a.b", b"a-b", b"caf\xc3\xa9", b"\xe2\x82\xac", b"bad\xff", b"z" * 300]


def _reference(paths: list[bytes], cap: int) -> tuple[list[str], int, int]:
    names = []
    unnameable = 0
    for p in paths:
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            unnameable += 1
        else:
            names.append(p)
    return [p.decode("utf-8") for p in sorted(names)[:cap]], len(names), unnameable


def _paths(rnd: random.Random, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        parts = [rnd.choice(STEMS) for _ in range(rnd.randint(1, 4))]
        if rnd.random() < 0.7:
            parts.append(b"f%05d" % rnd.randrange(100_000))
        out.append(b"./" + b"/".join(parts))
    # walk order is not path order; some names repeat (one path reached by two roots)
    out += rnd.sample(out, min(len(out), 20))
    rnd.shuffle(out)
    return out


@pytest.mark.parametrize("seed", range(10))
def test_any_chunking_keeps_the_first_paths_in_byte_order(seed: int) -> None:
    rnd = random.Random(seed)
    paths = _paths(rnd, rnd.choice([50, 3000, 20_000]))
    stream = b"".join(p + b"\0" for p in paths)
    cap = rnd.choice([1, 7, 100, 1000, 100_000])
    want, total, unnameable = _reference(paths, cap)
    big = glob_collect._GLOB_PIECE_BYTES
    for sizes in ([1, 3, 17], [4096], [big - 1, big + 1], [3 * big + 5], [len(stream)], [7, 5 * big, 1]):
        g = GlobCollector(cap)
        at = 0
        while at < len(stream):
            size = rnd.choice(sizes)
            g.feed(stream[at : at + size])
            at += size
        assert g.finish() == want, (seed, cap, sizes)
        assert g.total == total and g.drops.unnameable == unnameable
        assert g.drops.over_cap == total - len(want)


def test_paths_at_the_threshold_are_neither_lost_nor_doubled() -> None:
    """Paths equal to the kept threshold, prefixes of it and extensions of it, arriving after the
    threshold is set, across chunks larger than the collector's pieces."""
    first = [b"./m/%04d" % i for i in range(2000, 4100)]  # the first trim sets a threshold among these
    later = [b"./m/0", b"./m/2999", b"./m/29990", b"./m/299", b"./m/3000", b"./m/2998\xff", b"./m/\xc3\xa9"]
    paths = first + later * 3
    stream = b"".join(p + b"\0" for p in paths)
    want, total, unnameable = _reference(paths, 1000)
    for size in (glob_collect._GLOB_PIECE_BYTES * 2 + 3, 5, len(stream)):
        g = GlobCollector(1000)
        for i in range(0, len(stream), size):
            g.feed(stream[i : i + size])
        assert g.finish() == want
        assert (g.total, g.drops.unnameable) == (total, unnameable)

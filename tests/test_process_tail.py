"""The in-memory tail of a capture: the most recent bytes, exactly, whatever the read sizes."""

from __future__ import annotations

import random

import pytest

from zuno.process.tail import RingTail


def _fill(tail: RingTail, data: bytes) -> None:
    """What the capture does: read into the free views (here: copy), then commit."""
    at = 0
    for view in tail.free_views(0, len(data)):
        view[:] = data[at : at + len(view)]
        at += len(view)
    tail.commit(len(data))


def test_the_tail_holds_exactly_the_most_recent_bytes() -> None:
    rng = random.Random(7)
    keep, read_max = 1000, 256
    tail = RingTail(keep, read_max)
    written = bytearray()
    for i in range(600):
        n = rng.choice([1, 3, 17, 100, 255, 256])
        data = bytes(rng.randrange(256) for _ in range(n))
        if i % 7 == 0:
            tail.add(data)
        else:
            _fill(tail, data)
        written += data
        held = len(tail)
        assert held == min(keep, len(written))
        assert tail.start == len(written) - held
        assert tail.slice(0, held) == bytes(written[-held:])
        a = rng.randrange(held + 1)
        b = rng.randrange(a, held + 1)
        assert tail.slice(a, b) == bytes(written[len(written) - held + a : len(written) - held + b])
        # the bytes being read next never overwrite a held byte
        nxt = tail.free_views(0, read_max)
        for view in nxt:
            view[:] = b"\xee" * len(view)
        assert tail.slice(0, held) == bytes(written[-held:])


def test_a_read_longer_than_the_spare_room_is_refused() -> None:
    tail = RingTail(100, 10)
    with pytest.raises(AssertionError):
        tail.free_views(5, 6)


def test_add_of_more_than_one_read_keeps_the_newest() -> None:
    tail = RingTail(100, 10)
    data = bytes(range(256)) * 2
    tail.add(data)
    assert tail.end == len(data) and tail.slice(0, 100) == data[-100:]


def test_dropped_tail_holds_nothing_and_gives_its_pages_back() -> None:
    tail = RingTail(1 << 20, 1 << 16)
    _fill(tail, b"x" * 5000)
    tail.drop()
    assert len(tail) == 0 and tail.start == tail.end == 5000 and tail.slice(0, 10) == b""
    tail.release_pages()
    _fill(tail, b"more")  # a lingering writer: counted, not held
    assert tail.end == 5004 and len(tail) == 0


def test_released_pages_are_really_given_back() -> None:
    """A private mapping: after MADV_DONTNEED its pages are freed and read back as zeros (a shared
    one, Python's default, would keep the bytes, and the memory, until the object is gone)."""
    tail = RingTail(1 << 20, 1 << 16)
    _fill(tail, b"x" * 5000)
    tail.drop()
    tail.release_pages()
    (view,) = tail.views(0, 5000)
    assert bytes(view) == bytes(5000)

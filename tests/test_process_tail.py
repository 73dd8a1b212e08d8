"""The in-memory tail of a capture: the most recent bytes, exactly, whatever the read sizes."""

from __future__ import annotations

import random

from zuno.process.tail import ChunkTail


def test_the_tail_holds_exactly_the_most_recent_bytes() -> None:
    rng = random.Random(7)
    keep, chunk = 1000, 256
    tail = ChunkTail(keep, chunk)
    written = bytearray()
    for _ in range(500):
        n = rng.choice([1, 3, 17, 100, 255, 256])
        data = bytes(rng.randrange(256) for _ in range(n))
        if n >= chunk // 4:
            buf = tail.buffer()
            buf[:n] = data
            tail.add_owned(buf, n)
        else:
            tail.add_copy(data)
        written += data
        held = len(tail)
        assert min(keep, len(written)) <= held <= keep + chunk
        assert tail.slice(0, held) == bytes(written[-held:])
        a = rng.randrange(held + 1)
        b = rng.randrange(a, held + 1)
        assert tail.slice(a, b) == bytes(written[len(written) - held + a : len(written) - held + b])
    assert len(tail._pool) <= 4  # recycled buffers are bounded
    tail.clear()
    assert len(tail) == 0 and tail.slice(0, 10) == b""

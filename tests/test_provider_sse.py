"""The SSE reader of the provider adapters against the SDK's own decoder: the same events from the
same bytes, however the body is cut into chunks, with every line ending the SSE spec allows."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from openai._streaming import SSEDecoder

from zuno.agent.providers.sse import sse_events


class _Body:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


def ours(chunks: list[bytes]) -> list[tuple[str | None, str]]:
    async def go() -> list[tuple[str | None, str]]:
        return [ev async for ev in sse_events(_Body(chunks))]

    return asyncio.run(go())


def sdks(chunks: list[bytes]) -> list[tuple[str | None, str]]:
    async def go() -> list[tuple[str | None, str]]:
        return [(e.event, e.data) async for e in SSEDecoder().aiter_bytes(_Body(chunks).aiter_bytes())]

    return asyncio.run(go())


def cut(body: bytes, rnd: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(body):
        n = rnd.choice([1, 1, 2, 3, 7, 50, 4096])
        out.append(body[i : i + n])
        i += n
    return out


def test_plain_events_comments_names_and_multiline_data() -> None:
    body = (
        b": a comment\n"
        b"data: {\"a\": 1}\n\n"
        b"event: message_start\ndata: {\"type\": \"message_start\"}\n\n"
        b"data: line one\ndata: line two\ndata:no space\n\n"
        b"event: ping\n\n"
        b"data:  two spaces keep one\n\n"
        b"data: [DONE]\n\n"
    )
    want = [
        (None, '{"a": 1}'),
        ("message_start", '{"type": "message_start"}'),
        (None, "line one\nline two\nno space"),
        ("ping", ""),
        (None, " two spaces keep one"),
        (None, "[DONE]"),
    ]
    assert ours([body]) == want == sdks([body])


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_at_every_cut(eol: bytes) -> None:
    body = eol.join([b"event: a", b"data: x", b"", b"data: \xc3\xa9t\xc3\xa9", b"", b": c", b"data: y", b"", b""])
    want = [("a", "x"), (None, "été"), (None, "y")]
    assert ours([body]) == want == sdks([body])
    for i in range(1, len(body)):
        for j in range(i, len(body)):
            chunks = [body[:i], body[i:j], body[j:]]
            assert ours(chunks) == want, (i, j)


def test_an_event_the_body_does_not_end_is_dropped() -> None:
    for body in (b"data: a\n\ndata: b", b"data: a\n\ndata: b\n", b"data: a\r\n\r\ndata: b\r\n"):
        assert ours([body]) == [(None, "a")] == sdks([body])
    # A CR at the very end ends its line, and a blank line after it ends the event.
    assert ours([b"data: a\r", b"\r"]) == [(None, "a")] == sdks([b"data: a\r", b"\r"])


def test_random_streams_cut_at_random_decode_as_the_sdk_decodes_them() -> None:
    rnd = random.Random(7)
    for _ in range(300):
        eol = rnd.choice([b"\n", b"\r\n", b"\r"])
        lines: list[bytes] = []
        for _ in range(rnd.randint(1, 8)):
            if rnd.random() < 0.3:
                lines.append(b"event: " + rnd.choice([b"delta", b"x", b"ping"]))
            if rnd.random() < 0.2:
                lines.append(b": keep-alive")
            for _ in range(rnd.randint(1, 3)):
                text = "".join(rnd.choice('ab {}":,é\u2028') for _ in range(rnd.randint(0, 12)))
                lines.append(b"data:" + rnd.choice([b"", b" "]) + text.encode())
            lines.append(b"")
        body = eol.join(lines) + eol
        assert ours(cut(body, rnd)) == sdks([body]), body

"""Server-sent events read from a response body, a whole event at a time.

The SDKs make the request (auth, headers, the status error of a refused one) and hand over the
response; their own SSE decoders split the body line by line in Python, which cost more than the
rest of an agent step (a third of a millisecond per response). This reader splits the buffered
bytes on blank lines in one C pass per chunk and parses each event's few lines, with the
decoding the SSE specification gives: lines end with CRLF, LF or CR; a line starting with ":" is
a comment; "field: value" loses one leading space; ``data`` lines of one event are joined with
"\\n"; an event is dispatched by a blank line (a last event the body does not end is dropped);
fields other than ``event`` and ``data`` are not used by these APIs and are skipped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from zuno.agent.providers.retry import StreamFailure

# How much of an event's unreadable data a protocol error quotes.
QUOTE_CHARS = 80


class _Body(Protocol):
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


def _event(block: bytes) -> tuple[str | None, str] | None:
    event: str | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[:1] == b":":
            continue
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8") or None
    if event is None and not data:
        return None
    return event, b"\n".join(data).decode("utf-8")


async def sse_events(response: _Body) -> AsyncIterator[tuple[str | None, str]]:
    """(event name or None, data) of every event of the body, in order."""
    buf = b""
    async for chunk in response.aiter_bytes():
        data = buf + chunk if buf else chunk
        if b"\r" in data:
            # A CR ending the chunk may be the first half of a CRLF: it waits for the next byte.
            held = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n")
            data = data[:-1].replace(b"\r", b"\n") + b"\r" if held else data.replace(b"\r", b"\n")
        *blocks, buf = data.split(b"\n\n")
        for block in blocks:
            ev = _event(block)
            if ev is not None:
                yield ev
    if buf.endswith(b"\r"):  # the body ended: a held CR ends its line
        for block in (buf[:-1] + b"\n").split(b"\n\n")[:-1]:
            ev = _event(block)
            if ev is not None:
                yield ev


async def api_events(response: Any) -> AsyncIterator[tuple[str | None, str]]:
    """``sse_events`` of a provider's streamed answer, failing with a ``protocol`` StreamFailure
    (not retried) when the body is not an event stream at all (a JSON object or an HTML page
    answered with 200: a base URL that names something else) or is not UTF-8."""
    seen = False
    try:
        async for ev in sse_events(response):
            seen = True
            yield ev
    except UnicodeDecodeError:
        raise StreamFailure("protocol", "the server sent an event that is not UTF-8") from None
    if not seen:
        headers = getattr(response, "headers", None)
        ctype = (headers.get("content-type") if headers is not None else None) or "no content type"
        status = getattr(response, "status_code", 200)
        raise StreamFailure(
            "protocol",
            f"the server answered HTTP {status} with {ctype.split(';')[0]}, not an event stream: "
            "check that options.baseURL is the address of the API itself",
        )


def event_json(data: str) -> Any:
    """An event's data as JSON, or a ``protocol`` StreamFailure quoting its start."""
    try:
        return json.loads(data)
    except ValueError:
        raise StreamFailure(
            "protocol", f"the server sent an event whose data is not JSON: {data[:QUOTE_CHARS]!r}"
        ) from None

"""What the SDK's stdio transport drops without a word, answered as JSON-RPC says.

The SDK decodes each line as a JSON-RPC message and, when that fails, hands the error to the
server, which only logs it: a line that is not JSON, a batch, or a request whose envelope is
wrong (``params`` not an object, no ``"jsonrpc": "2.0"``) never gets a response, and a client that
sent one waits forever. A request whose ``id`` is not a string or an integer (``null``, ``1.5``,
``true``) is worse: it decodes as a *notification* and is silently run without an answer.

``reject`` decides, for one line, the error response it must get (JSON-RPC 2.0 §5.1: parse error
-32700, invalid request -32600, both with ``id: null`` when the id cannot be read; MCP ids are
strings or integers, never null; MCP has no batches since 2025-06-18), or None when the SDK
should decode the line itself. A malformed *response* or notification from the client gets no
answer (JSON-RPC never answers those).
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types

# The longest message read from a client, on either transport (a stdio line, an HTTP request body):
# far above Zuno's own limit on a call (``limits.CALL_MAX_BYTES``, 32 MiB of arguments, which JSON
# escaping can grow several times), so a call too large is refused by admission with its reason,
# not by the transport.
MAX_MESSAGE_BYTES = 256 << 20


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _error(rid: Any, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message))


def reject(line: str) -> types.JSONRPCError | None:
    """The error response this line must get before the SDK sees it, or None to pass it on."""
    text = line.strip()
    if not text:
        return None
    try:
        msg = json.loads(text)
    except ValueError as e:
        return _error(None, types.PARSE_ERROR, f"Parse error: the message is not JSON ({e})")
    if isinstance(msg, list):
        return _error(None, types.INVALID_REQUEST, "Invalid request: MCP has no batches; send one message at a time")
    if not isinstance(msg, dict):
        return _error(None, types.INVALID_REQUEST, "Invalid request: a message must be a JSON object")
    if "method" not in msg:
        return None  # a response (or nothing a server can answer): the SDK decodes or drops it
    has_id = "id" in msg
    rid = msg.get("id")
    if has_id and not _valid_id(rid):
        shown = json.dumps(rid)
        return _error(None, types.INVALID_REQUEST, f"Invalid request: 'id' must be a string or an integer, not {shown}")
    problem = _envelope_problem(msg)
    if problem is None:
        return None
    code = types.INVALID_PARAMS if problem.startswith("'params") else types.INVALID_REQUEST
    label = "Invalid params" if code == types.INVALID_PARAMS else "Invalid request"
    return _error(rid if has_id else None, code, f"{label}: {problem}")


def _envelope_problem(msg: dict[str, Any]) -> str | None:
    if msg.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if not isinstance(msg.get("method"), str):
        return "'method' must be a string"
    params = msg.get("params")
    if params is not None and not isinstance(params, dict):
        return "'params' must be an object"
    if msg["method"] == "tools/call" and "id" in msg:
        # The SDK answers these -32602 "Invalid request parameters" without naming the field.
        if not isinstance((params or {}).get("name"), str):
            return "'params.name' must be a string: the name of the tool to call"
        arguments = (params or {}).get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return "'params.arguments' must be an object of the tool's arguments"
    return None


# A request's own id, where a client writes it: before ``params`` and before any nested value.
_ENVELOPE_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def oversized(head: bytes, limit: int) -> types.JSONRPCError:
    """The answer to a line longer than ``limit`` (dropped unread): an invalid request naming the
    limit, with the request's id when its envelope shows it before any nested value."""
    prefix = head[:4096]
    nested = min((i for i in (prefix.find(b"{", 1), prefix.find(b"[")) if i >= 0), default=len(prefix))
    found = _ENVELOPE_ID.search(prefix[:nested])
    rid: Any = None
    if found is not None:
        rid = json.loads(found.group(1))
    mib = limit >> 20
    return _error(
        rid,
        types.INVALID_REQUEST,
        f"Invalid request: a message longer than {mib} MiB was dropped unread; send less per message",
    )


def not_utf8(e: UnicodeDecodeError) -> types.JSONRPCError:
    """The answer to a line that is not UTF-8 (JSON text is): a parse error naming the byte."""
    return _error(
        None,
        types.PARSE_ERROR,
        f"Parse error: the message is not UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
        "send JSON encoded as UTF-8 (escape other characters as \\uXXXX)",
    )

"""A hand-written stdio "MCP server" that handshakes correctly, then answers tools/call with
garbage: a line that is not JSON, then a result of the wrong shape. For Zuno's client tests."""

from __future__ import annotations

import json
import sys


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


TOOL = {"name": "mangle", "description": "Answers with garbage.", "inputSchema": {"type": "object"}}

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue  # a notification
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbage", "version": "0"}}})  # fmt: skip
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}})
    elif method == "tools/call":
        sys.stdout.write("this is not JSON-RPC at all\n")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list", "isError": "maybe"}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})

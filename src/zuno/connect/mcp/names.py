"""Names and declarations of connected MCP tools.

A tool is registered as ``mcp_<server>_<tool>``: every character outside ``[A-Za-z0-9_-]``
becomes ``_`` and a name over 64 characters (what providers accept) keeps its first 55 and a
hash of the whole. Two tools that would get one name are refused at start, naming both.

Declarations: an untrusted server's tools are SideEffecting / Never / Exclusive whatever their
annotations claim; a trusted server's ``readOnlyHint`` gives ReadOnly / Safe / ParallelSafe, its
``idempotentHint`` (not read-only) gives Safe, anything else the strictest; a per-tool override in
the config wins over both, field by field.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from zuno import limits
from zuno.config import McpToolDeclarations
from zuno.declarations import READ_ONLY_PARALLEL, STRICT, Concurrency, Declarations, Effect, Replay

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
HASH_CHARS = 8


class NameCollision(Exception):
    """Two connected tools (or a connected tool and a built-in one) would share a name."""


def sanitise(text: str) -> str:
    return _UNSAFE.sub("_", text)


def tool_name(server: str, tool: str) -> str:
    full = f"mcp_{sanitise(server)}_{sanitise(tool)}"
    if len(full) <= limits.MCP_TOOL_NAME_MAX:
        return full
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:HASH_CHARS]
    return full[: limits.MCP_TOOL_NAME_MAX - HASH_CHARS - 1] + "_" + digest


def declarations_for(annotations: Any, trusted: bool, override: McpToolDeclarations | None) -> Declarations:
    decl = STRICT
    if trusted and annotations is not None:
        if getattr(annotations, "read_only_hint", None) is True:
            decl = READ_ONLY_PARALLEL
        elif getattr(annotations, "idempotent_hint", None) is True:
            decl = Declarations(Effect.SideEffecting, Replay.Safe, Concurrency.Exclusive)
    if override is not None:
        decl = Declarations(
            Effect(override.effect) if override.effect else decl.effect,
            Replay(override.replay) if override.replay else decl.replay,
            Concurrency(override.concurrency) if override.concurrency else decl.concurrency,
        )
    return decl

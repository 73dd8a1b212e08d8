"""How a Zuno tool is listed to an MCP client: its JSON Schema, an output schema that describes
every outcome, and annotations derived from its declarations (never from its name).

    readOnlyHint    <= effect ReadOnly
    destructiveHint <= effect SideEffecting or Delegating (false for ReadOnly and UserMediated)
    idempotentHint  <= replay Safe
    openWorldHint   <= the tool reaches outside the workspace (shell, web, a proxied MCP server)

A mixed tool (one whose effect is read from its ``action``) is annotated by its strictest action,
and its description says so.
"""

from __future__ import annotations

from typing import Any

from zuno.declarations import Declarations, Effect, Replay
from zuno.tool import Tool

# Tools whose calls reach outside the workspace: the shell, the web, other MCP servers.
OPEN_WORLD_TOOLS = frozenset({"shell", "webfetch", "web_fetch", "web_search"})
OPEN_WORLD_PREFIXES = ("mcp_",)

OUTCOMES = ["ok", "error", "blocked", "uncertain"]
BLOCK_KINDS = ["invalid_arguments", "unavailable", "denied"]

# One schema for every tool and every outcome: a TypeScript-SDK client validates structuredContent
# against the output schema on error results too, so nothing here is specific to "ok".
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "outcome": {"type": "string", "enum": OUTCOMES},
        "block_kind": {"type": ["string", "null"], "enum": [*BLOCK_KINDS, None]},
        "cancelled": {"type": "boolean"},
        "call_id": {"type": "string"},
        "session": {"type": "string"},
        "step": {"type": "integer"},
        "declarations": {
            "type": "object",
            "properties": {
                "effect": {"type": "string"},
                "replay": {"type": "string"},
                "concurrency": {"type": "string"},
            },
        },
        "receipt": {"type": ["object", "null"]},
        "writtenPaths": {"type": "array", "items": {"type": "string"}},
        "outputPaths": {"type": "array", "items": {"type": "string"}},
        "withheldOutput": {"type": ["object", "null"]},
        "conflict": {"type": ["object", "null"]},
        "metadata": {"type": "object"},
        "notices": {"type": "array", "items": {"type": "object"}},
        "started_at": {"type": ["number", "null"]},
        "ended_at": {"type": ["number", "null"]},
    },
    "required": ["outcome", "block_kind", "cancelled", "declarations", "metadata", "notices"],
}


def strictest(tool: Tool) -> tuple[Declarations, bool]:
    """The declarations a tool is annotated with, and whether it is mixed (classified per action)."""
    effects = tool.action_effects
    if not effects:
        return tool.declarations, False
    if any(e is Effect.SideEffecting for e in effects.values()):
        return Declarations(Effect.SideEffecting, Replay.Never, tool.declarations.concurrency), True
    return tool.declarations, True


def open_world(name: str) -> bool:
    return name in OPEN_WORLD_TOOLS or name.startswith(OPEN_WORLD_PREFIXES)


def annotations(tool: Tool) -> dict[str, Any]:
    decl, _ = strictest(tool)
    read_only = decl.effect is Effect.ReadOnly
    return {
        "title": tool.name,
        "readOnlyHint": read_only,
        "destructiveHint": decl.effect in (Effect.SideEffecting, Effect.Delegating),
        "idempotentHint": decl.replay is Replay.Safe,
        "openWorldHint": open_world(tool.name),
    }


def description(tool: Tool) -> str:
    text = tool.description
    decl, mixed = strictest(tool)
    if mixed and tool.action_effects:
        by_effect: dict[str, list[str]] = {}
        for action, effect in tool.action_effects.items():
            by_effect.setdefault(str(effect), []).append(action)
        parts = "; ".join(f"{', '.join(actions)}: {effect}" for effect, actions in by_effect.items())
        text += (
            f" [Annotated by its strictest action ({decl.effect}); each call is classified by its action — {parts}.]"
        )
    return text


def tool_listing(tool: Tool) -> dict[str, Any]:
    """The tools/list entry of a tool, in wire form."""
    return {
        "name": tool.name,
        "title": tool.name,
        "description": description(tool),
        "inputSchema": tool.input_schema(),
        "outputSchema": OUTPUT_SCHEMA,
        "annotations": annotations(tool),
    }

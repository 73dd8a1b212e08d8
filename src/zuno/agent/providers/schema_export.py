"""Tool declarations (``ToolSpec``) exported in each API's own shape, from the same schema."""

from __future__ import annotations

import copy
from typing import Any

from zuno.agent.types import HostedTool, ToolSpec


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Every API wants an object schema at the top; a spec without one gets an empty object."""
    out = copy.deepcopy(schema) if schema else {}
    if out.get("type") != "object":
        out = {"type": "object", "properties": {}} if not out else {**out, "type": "object"}
    out.setdefault("properties", {})
    return out


def chat_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "function",
         "function": {"name": t.name, "description": t.description, "parameters": _object_schema(t.input_schema)}}
        for t in tools
    ]


def responses_tools(tools: tuple[ToolSpec, ...], hosted: tuple[HostedTool, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "function", "name": t.name, "description": t.description,
         "parameters": _object_schema(t.input_schema), "strict": False}
        for t in tools
    ]
    for h in hosted:
        if h.kind == "web_search":
            entry: dict[str, Any] = {"type": "web_search"}
            if h.allowed_domains:
                entry["filters"] = {"allowed_domains": list(h.allowed_domains)}
            out.append(entry)
    return out


# Anthropic's hosted web search, as documented (server tool version 2025-03-05).
ANTHROPIC_WEB_SEARCH_TYPE = "web_search_20250305"


def anthropic_tools(tools: tuple[ToolSpec, ...], hosted: tuple[HostedTool, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": _object_schema(t.input_schema)}
        for t in tools
    ]
    for h in hosted:
        if h.kind == "web_search":
            entry: dict[str, Any] = {"type": ANTHROPIC_WEB_SEARCH_TYPE, "name": "web_search"}
            # The API takes one of the two lists, never both: with both, the allowed list
            # minus the blocked domains says the same thing.
            if h.allowed_domains:
                blocked = set(h.blocked_domains)
                entry["allowed_domains"] = [d for d in h.allowed_domains if d not in blocked]
            elif h.blocked_domains:
                entry["blocked_domains"] = list(h.blocked_domains)
            out.append(entry)
    return out

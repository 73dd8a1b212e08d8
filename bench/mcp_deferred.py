"""Deferred schemas and tool_search with 100 connected MCP tools (one real SDK server, stdio).

1. Prompt bytes of the visible surface (name + description + JSON Schema of every tool the model
   sees) with deferred schemas against without. Target: >= 85% smaller. Printed twice: for the
   whole surface (the built-in tools, untouched by deferral, included), and for what the connected
   tools cost (their 100 schemas, against tool_search's one). The built-in tools' own share is
   printed against zuno.schema_export.BUILTIN_SURFACE_BUDGET_BYTES, the budget that keeps the
   whole surface under the target.
2. tool_search top-3 recall on 50 queries written from the tools' descriptions. Target: >= 95%.

    python bench/mcp_deferred.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import zuno
from mcp_catalog import QUERIES
from zuno.schema_export import BUILTIN_SURFACE_BUDGET_BYTES

SERVER = str(Path(__file__).with_name("mcp_catalog.py"))


def prompt_bytes(tools: list[zuno.Tool]) -> int:
    return sum(
        len(json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema()})) for t in tools
    )


def connected(tools: list[zuno.Tool]) -> list[zuno.Tool]:
    return [t for t in tools if t.name.startswith("mcp_cat_") or t.name == "tool_search"]


def builtin(tools: list[zuno.Tool]) -> list[zuno.Tool]:
    return [t for t in tools if not t.name.startswith(("mcp_", "tool_search"))]


async def surface(root: Path, defer: str) -> tuple[int, int, int, int, zuno.Session, zuno.Runtime]:
    cfg = {"mcp": {"cat": {"command": sys.executable, "args": [SERVER]}}, "tool_search": {"defer": defer}}
    rt = zuno.Runtime(root=root, config_overrides=cfg)
    s = rt.session()
    await s.open()
    visible = s.visible_tools()
    own = prompt_bytes(builtin(visible))
    return prompt_bytes(visible), len(visible), prompt_bytes(connected(visible)), own, s, rt


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        full, n_full, full_mcp, own, s1, rt1 = await surface(root, "never")
        await s1.close()
        await rt1.aclose()
        deferred, n_def, deferred_mcp, _, s, rt = await surface(root, "always")
        hits = 0
        misses = []
        for query, want in QUERIES:
            res = await s.step([{"name": "tool_search", "arguments": {"query": query, "limit": 3}}])
            got = res.results[0].metadata.get("matches", [])
            if f"mcp_cat_{want}" in got:
                hits += 1
            else:
                misses.append((query, want, got))
        await s.close()
        await rt.aclose()
    saved = 1 - deferred / full
    recall = hits / len(QUERIES)
    print(f"visible surface: {n_full} tools, {full} bytes without deferral; {n_def} tools, {deferred} bytes deferred")
    print(f"prompt bytes, whole surface: {saved:.1%} smaller with deferred schemas (target >= 85%)")
    print(f"  of which the built-in tools: {own} bytes (budget {BUILTIN_SURFACE_BUDGET_BYTES})")
    print(
        f"prompt bytes, connected tools: {full_mcp} -> {deferred_mcp}: {1 - deferred_mcp / full_mcp:.1%} smaller "
        "(target >= 85%)"
    )
    print(f"tool_search top-3 recall: {hits}/{len(QUERIES)} = {recall:.0%} (target >= 95%)")
    for m in misses:
        print("  miss:", m)


if __name__ == "__main__":
    asyncio.run(main())

"""Deferred schemas and ``tool_search``.

When connected MCP tools are on the surface, their full schemas are withheld from the model
(config ``tool_search.defer``: "always", "never", or when they would take more than N prompt
tokens) and ``tool_search`` appears (ReadOnly / Safe / ParallelSafe). It ranks compact metadata —
name, server, title, description, argument names — with BM25; an exact tool name is always the
first match. Every match is recorded as an expansion of the session's visible surface (an event
in the store), so it is visible from the next step on and after a restart.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field

from zuno import limits
from zuno.declarations import READ_ONLY_PARALLEL
from zuno.tool import Tool, ToolArgs, ToolContext, ToolOutput

EXPANDED_EVENT = "tools-expanded"
BYTES_PER_TOKEN = 4
BM25_K1 = 1.2
BM25_B = 0.75
# Field weights: a word in the name or title counts more than one in the description.
WEIGHTS = {"name": 3, "server": 2, "title": 2, "description": 1, "args": 2}

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP = frozenset("a an the of to for in on and or is are be by with from this that it its as at".split())


def words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(_CAMEL.sub(" ", text)):
        w = w.lower()
        if w in _STOP:
            continue
        out.append(w)
        if len(w) > 4 and w.endswith("s"):
            out.append(w[:-1])
    return out


def metadata(tool: Any) -> dict[str, str]:
    remote = getattr(tool, "remote", None)
    props = (getattr(remote, "input_schema", None) or {}).get("properties", {}) if remote is not None else {}
    return {
        "name": tool.name + " " + (remote.name if remote is not None else ""),
        "server": str(getattr(tool, "server", "")),
        "title": str(getattr(remote, "title", "") or ""),
        "description": tool.description,
        "args": " ".join(props),
    }


class Index:
    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = list(tools)
        self.docs: list[Counter[str]] = []
        for t in self.tools:
            doc: Counter[str] = Counter()
            for field_name, text in metadata(t).items():
                for w in words(text):
                    doc[w] += WEIGHTS[field_name]
            self.docs.append(doc)
        self.avg = sum(sum(d.values()) for d in self.docs) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def search(self, query: str, limit: int) -> list[Tool]:
        q = query.strip()
        exact = [t for t in self.tools if t.name == q or getattr(getattr(t, "remote", None), "name", None) == q]
        terms = words(q)
        scored: list[tuple[float, int]] = []
        for i, doc in enumerate(self.docs):
            length = sum(doc.values())
            score = 0.0
            for w in terms:
                tf = doc.get(w, 0)
                if tf:
                    norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * length / (self.avg or 1))
                    score += self.idf[w] * tf * (BM25_K1 + 1) / norm
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda x: (-x[0], x[1]))
        ranked = exact + [self.tools[i] for _, i in scored if self.tools[i] not in exact]
        return ranked[:limit]


def listing_bytes(tools: Sequence[Tool]) -> int:
    return sum(
        len(json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema()})) for t in tools
    )


def should_defer(defer: str | int, tools: Sequence[Tool]) -> bool:
    if not tools or defer == "never":
        return False
    if defer == "always":
        return True
    return listing_bytes(tools) / BYTES_PER_TOKEN > int(defer)


class ToolSearchArgs(ToolArgs):
    query: str = Field(
        min_length=1, description="What the tool should do, or its exact name (mcp_<server>_<tool> or the server's)."
    )
    limit: int | None = Field(
        None,
        ge=1,
        le=limits.TOOL_SEARCH_MAX_RESULTS,
        description=f"How many matches (default {limits.TOOL_SEARCH_DEFAULT_RESULTS}).",
    )


class ToolSearchTool(Tool):
    name = "tool_search"
    description = (
        "Search the connected MCP tools whose schemas are not in your tool list yet (by name, server, title, "
        "description and argument names). Every match is callable, and its full schema is in your tool list "
        "from the next step on."
    )
    Args = ToolSearchArgs
    declarations = READ_ONLY_PARALLEL

    def __init__(self, catalog: Callable[[], Sequence[Tool]]) -> None:
        self._catalog = catalog
        self._index: Index | None = None

    def subject(self, args: ToolArgs) -> str | None:
        return None

    async def run(self, ctx: ToolContext, args: ToolSearchArgs) -> ToolOutput:
        if self._index is None:
            self._index = Index(self._catalog())
        found = self._index.search(args.query, args.limit or limits.TOOL_SEARCH_DEFAULT_RESULTS)
        if not found:
            return ToolOutput(text=f"no connected tool matches {args.query!r}.", metadata={"matches": []})
        names = [t.name for t in found]
        ctx.store.add_event(
            ctx.session_id, EXPANDED_EVENT, {"names": names}, step=ctx.step, call_seq=ctx.call_seq, call_id=ctx.call_id
        )
        lines = []
        for t in found:
            props = list(t.input_schema().get("properties", {}))
            args_text = ", ".join(p for p in props if p not in ("intent", "accept_large_output"))
            lines.append(f"{t.name}({args_text}) — {t.description}")
        text = (
            "\n".join(lines)
            + "\n(These tools are callable now; their schemas are in your tool list from the next step.)"
        )
        return ToolOutput(text=text, metadata={"matches": names})


def expanded_names(store: Any, session_id: str) -> set[str]:
    rows = store.query("SELECT data FROM events WHERE session_id = ? AND kind = ?", (session_id, EXPANDED_EVENT))
    out: set[str] = set()
    for (data,) in rows:
        out.update(json.loads(data).get("names", []))
    return out

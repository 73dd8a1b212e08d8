"""web_search (zuno profile): batch web search through the configured provider.

ReadOnly / Safe / ParallelSafe. Queries of one call run in parallel; results are numbered
across the batch with title, URL and snippet. A failure names only provider, scheme, host,
path, status and category. When every query failed and every failure may pass (rate limited,
server error, timeout, connect), the call raises ``TransientError`` so the runtime may retry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from zuno import limits
from zuno.connect.web_search import Hit, SearchFailure, build_provider, search_batch
from zuno.connect.web_search.base import Reply
from zuno.connect.web_search.service import NotConfigured
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput, TransientError
from zuno.tools.web.fetch_tool import fetcher


class WebSearchArgs(ToolArgs):
    queries: list[str] = Field(
        min_length=1,
        max_length=limits.WEB_SEARCH_MAX_QUERIES,
        description="Run in parallel",
    )
    max_results: int | None = Field(
        None, ge=1, le=limits.WEB_SEARCH_MAX_RESULTS, description="Per query (default: config)"
    )
    allowed_domains: list[str] | None = Field(None, description="Only these domains")
    blocked_domains: list[str] | None = Field(None, description="Not these domains")

    @model_validator(mode="after")
    def _nonempty(self) -> WebSearchArgs:
        for i, q in enumerate(self.queries):
            if not q.strip():
                raise ValueError(f"queries[{i}] is empty; give the words to search for")
        return self


class WebSearchTool(Tool):
    name = "web_search"
    description = (
        "Search the web (configured provider). Numbered results: title, URL, snippet; fetch one with webfetch."
    )
    Args = WebSearchArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: WebSearchArgs) -> ToolOutput:
        cfg = ctx.config.web_search
        try:
            provider = build_provider(cfg, os.environ)
        except NotConfigured as e:
            raise Refused(BlockKind.unavailable, str(e)) from None
        engine = fetcher(ctx)

        async def request(
            url: str,
            *,
            method: str,
            headers: Mapping[str, str],
            content: bytes | None,
            timeout_s: float,
            max_bytes: int,
        ) -> Reply:
            resp = await engine.request_configured(
                url, method=method, headers=headers, content=content, timeout_s=timeout_s, max_bytes=max_bytes
            )
            from zuno.tools.web.engine import retry_after_s

            return Reply(resp.status, resp.body, retry_after_s(resp.header("retry-after")))

        count = args.max_results or cfg.max_results
        allowed = [*cfg.allowed_domains, *(args.allowed_domains or [])]
        blocked = [*cfg.blocked_domains, *(args.blocked_domains or [])]
        outcomes = await search_batch(provider, args.queries, count, request, allowed, blocked)
        failures = [o for o in outcomes if isinstance(o, SearchFailure)]
        if failures and len(failures) == len(outcomes):
            if all(f.transient for f in failures):
                raise TransientError(str(failures[0]))
            return ToolOutput.failure(
                "[error] " + "\n".join(sorted({str(f) for f in failures})),
                webSearch=[f.diagnostics() for f in failures],
            )
        lines: list[str] = []
        n = 0
        meta_results: list[dict[str, Any]] = []
        for qi, (query, outcome) in enumerate(zip(args.queries, outcomes, strict=True), start=1):
            if len(args.queries) > 1:
                lines.append(f"## Query {qi}: {query}")
            if isinstance(outcome, SearchFailure):
                lines.append(f"[error] {outcome}")
                meta_results.append({"query": qi, "error": outcome.diagnostics()})
            elif not outcome:
                lines.append("No results.")
                meta_results.append({"query": qi, "results": 0})
            else:
                for hit in outcome:
                    n += 1
                    lines.append(_render(n, hit))
                meta_results.append({"query": qi, "results": len(outcome)})
            lines.append("")
        plural = "query" if len(args.queries) == 1 else "queries"
        return ToolOutput(
            text="\n".join(lines).rstrip() + "\n",
            head=f"web_search via {provider.name}: {n} result(s) for {len(args.queries)} {plural}",
            metadata={"provider": provider.name, "queries": meta_results},
        )


def one_line_url(url: str) -> str:
    """A result's URL with whitespace and control characters percent-encoded (UTF-8), as a browser
    sends them: a line break in it would otherwise start a line of its own in the listing (a forged
    result, "2. ..." and its URL, under the real one's number)."""
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        if ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u2028\u2029"
        else ch
        for ch in url
    )


def _render(n: int, hit: Hit) -> str:
    # One line each: a line break in a provider's title would read as the result's URL line.
    snippet = " ".join(hit.snippet.split())
    title = " ".join(hit.title.split())
    url = one_line_url(hit.url)
    out = f"{n}. {title or url}\n   {url}"
    return out + (f"\n   {snippet}" if snippet else "")

"""webfetch (zuno) and web_fetch (chord): one URL, validated, pinned, converted to text.

ReadOnly / Safe / ParallelSafe. The permission subject is the URL, so permission rules match
URL patterns in both profiles. A refused URL is a blocked call (invalid_arguments); a hop whose
addresses are not public is blocked (denied) — in both cases nothing was sent to the target.
Transient failures (see ``errors``) raise ``TransientError`` so the runtime may retry after a
backoff; every other failure is an error result naming the problem.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from zuno import limits
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind
from zuno.permissions import decide
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput, TransientError
from zuno.tools.web.content import ConversionTimeout, decode, html_to_markdown
from zuno.tools.web.errors import AddressRefused, FetchError, HttpStatusError, UrlRefused
from zuno.tools.web.urls import Target, parse_target, redact

if TYPE_CHECKING:  # the engine (httpcore) loads at the first fetch, not with the surface
    from zuno.tools.web.engine import Fetched, Fetcher


# The conversion gets at least this long, however much of the timeout the fetch spent: a small
# page fetched just before the deadline is still converted.
CONVERT_FLOOR_S = 2.0


class WebfetchArgs(ToolArgs):
    url: str = Field(description="No credentials in it")
    format: Literal["markdown", "raw"] = Field(
        "markdown", description="markdown: HTML as Markdown; raw: the decoded body"
    )
    timeout_ms: int | None = Field(
        None, ge=1, description="Whole fetch, redirects included (default 30000, max 120000)"
    )
    headers: dict[str, str] | None = Field(
        None,
        description="Authorization and Cookie dropped when a redirect leaves the origin",
    )


def fetcher(ctx: ToolContext) -> Fetcher:
    from zuno.tools.web.engine import Fetcher

    return ctx.services.get(Fetcher, Fetcher)


class WebfetchTool(Tool):
    name = "webfetch"
    description = (
        "Fetch one http(s) URL as text (HTML as Markdown; JSON, text, XML as they are; PDF and images refused). "
        "Non-public addresses are refused; at most 5 redirects."
    )
    Args = WebfetchArgs
    declarations = READ_ONLY_PARALLEL

    def subject(self, args: ToolArgs) -> str | None:
        """The canonical URL (lowercase scheme and host, A-label, no default port, no fragment),
        so a permission pattern cannot be dodged by spelling; the raw text when it is refused."""
        url = getattr(args, "url", None)
        if not isinstance(url, str):
            return None
        try:
            return parse_target(url).url
        except UrlRefused:
            return redact(url)  # a refused URL's credentials are not shown in an approval prompt

    def _hop_check(self, ctx: ToolContext) -> Callable[[Target], str | None]:
        def check(target: Target) -> str | None:
            d = decide(ctx.config.permission, self.name, target.url, self.declarations)
            if d.action == "deny":
                return d.reason
            if d.action == "ask":
                return f"{d.reason}; a redirect cannot be approved mid-call, fetch {target.url} directly"
            return None

        return check

    async def run(self, ctx: ToolContext, args: WebfetchArgs) -> ToolOutput:
        cfg = ctx.config.webfetch
        notices: list[str] = []
        timeout_ms = args.timeout_ms if args.timeout_ms is not None else cfg.timeout_ms
        if timeout_ms > limits.WEBFETCH_MAX_TIMEOUT_MS:
            notices.append(
                f"[notice] timeout_ms {timeout_ms} is over the per-call maximum; clamped to "
                f"{limits.WEBFETCH_MAX_TIMEOUT_MS}."
            )
            timeout_ms = limits.WEBFETCH_MAX_TIMEOUT_MS
        from zuno.tools.web.engine import check_headers

        try:
            check_headers(args.headers)
        except ValueError as e:
            raise Refused(BlockKind.invalid_arguments, f"{e}. Remove that header.") from None
        started = time.monotonic()
        try:
            got = await fetcher(ctx).fetch(
                args.url,
                timeout_s=timeout_ms / 1000,
                max_bytes=cfg.max_bytes,
                allow_private=cfg.allow_private,
                headers=args.headers,
                hop_check=self._hop_check(ctx),
            )
        except UrlRefused as e:
            raise Refused(BlockKind.invalid_arguments, e.message, category=e.category) from None
        except AddressRefused as e:
            raise Refused(BlockKind.denied, e.message, category=e.category) from None
        except FetchError as e:
            if e.transient:
                raise TransientError(f"{e.category}: {e.message}") from None
            meta: dict[str, Any] = {"category": e.category}
            if isinstance(e, HttpStatusError):
                meta["status"] = e.status
            return ToolOutput.failure(f"[error] {e.message}", **meta)
        # Decoding and HTML conversion are CPU work on up to max_bytes: off the event loop, so
        # parallel fetches keep streaming meanwhile.
        # The call's timeout covers the conversion too: a hostile (or merely huge) page took minutes
        # of markdownify after the fetch had finished inside its timeout.
        deadline = max(started + timeout_ms / 1000, time.monotonic() + CONVERT_FLOOR_S)
        stop = threading.Event()  # set when this call stops waiting: the worker thread stops too
        try:
            text, charset, converted = await asyncio.wait_for(
                asyncio.to_thread(_convert, got, args.format, deadline, stop), deadline - time.monotonic()
            )
        except (ConversionTimeout, TimeoutError):
            return ToolOutput.failure(
                f"[error] converting {got.final_url} ({len(got.body)} bytes of HTML) to Markdown timed out after "
                f"{time.monotonic() - started:.2f} s (limit {timeout_ms / 1000:g} s) in the convert phase, route "
                f"{got.routes[-1] if got.routes else 'direct'}; the fetch itself took {got.elapsed:.2f} s. It was not "
                'retried. Fetch it with format "raw" for the HTML as it is, or with a larger timeout_ms '
                f"(at most {limits.WEBFETCH_MAX_TIMEOUT_MS}).",
                category="timeout",
            )
        finally:
            stop.set()
        return self._render(got, text, charset, converted, notices, time.monotonic() - started)

    def _render(
        self, got: Fetched, text: str, charset: str, converted: bool, notices: list[str], elapsed: float
    ) -> ToolOutput:
        via = f" via {len(got.redirects)} redirect(s)" if got.redirects else ""
        head_lines = [
            *notices,
            f"{got.final_url}: HTTP {got.status}, {got.content_type.mime or 'no content type'}, "
            f"{len(got.body)} bytes{via}{', converted to Markdown' if converted else ''}",
        ]
        metadata: dict[str, Any] = {
            "url": got.url,
            "finalUrl": got.final_url,
            "status": got.status,
            "contentType": got.content_type.mime,
            "charset": charset,
            "bytes": len(got.body),
            "redirects": got.redirects,
            "routes": got.routes,
            "addresses": got.addresses,
            "elapsedMs": round(elapsed * 1000),
        }
        if got.widened:
            metadata["allowPrivate"] = got.widened
            head_lines.append(
                "[notice] webfetch.allow_private let through: "
                + ", ".join(f"{w['host']} -> {w['address']} (by {w['allowedBy']})" for w in got.widened)
            )
        if notices:
            metadata["notices"] = notices
        return ToolOutput(text=text, head="\n".join(head_lines), metadata=metadata)


def _convert(
    got: Fetched, fmt: str, deadline: float | None = None, stop: threading.Event | None = None
) -> tuple[str, str, bool]:
    text, charset = decode(got.body, got.content_type)
    if got.content_type.is_html and fmt == "markdown":
        return html_to_markdown(text, got.final_url, deadline, stop), charset, True
    return text, charset, False


class ChordWebFetchTool(WebfetchTool):
    name = "web_fetch"
    description = (
        "Fetch a URL and convert it to readable text (HTML to Markdown). Non-public addresses are refused; "
        "at most 5 redirects; process proxy settings honoured. PDF and images are refused."
    )

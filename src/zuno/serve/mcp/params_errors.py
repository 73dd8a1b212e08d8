"""The SDK's bare "Invalid request parameters" (-32602, empty data) named: which field is wrong
and how, or that the client has not sent ``initialize`` yet."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

_BARE = "Invalid request parameters"


def _field(loc: tuple[Any, ...]) -> str:
    return "params" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def named(e: ValidationError) -> str:
    first = e.errors()[0]
    loc = tuple(p for p in first.get("loc", ()) if p not in ("json-or-python", "python"))
    if loc[:1] == ("params",):
        loc = loc[1:]
    got = repr(first.get("input"))[:80]
    what = str(first.get("msg", "is invalid")).lower()
    return f"Invalid params: '{_field(loc)}': {what} (got {got}); correct it and send the request again"


class NamedParamsErrors:
    """Server middleware: a request the SDK refuses with the bare message gets one naming why."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except ValidationError as e:
            raise MCPError(types.INVALID_PARAMS, named(e)) from None
        except MCPError as e:
            if e.error.code == types.INVALID_PARAMS and e.error.message == _BARE and not e.error.data:
                raise MCPError(
                    types.INVALID_PARAMS,
                    f"Invalid request: {ctx.method!r} before initialize; send initialize (then "
                    "notifications/initialized) first",
                ) from None
            raise

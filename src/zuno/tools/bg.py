"""bg: inspect background commands and page output kept out of the transcript.

This module holds the ``artifact`` action: a bounded window of output that a size limit
withheld. It never re-runs anything and never passes through the output limits (a retrieved
window is already bounded). The other actions arrive with background execution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from zuno.declarations import READ_ONLY_PARALLEL, BlockKind, Effect
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.windows import read_window


class BgArgs(ToolArgs):
    action: Literal["artifact"] = Field(description="artifact: read a window of withheld output.")
    outputPath: str | None = Field(None, description="The artifact path a withheld-output notice named.")
    cursor: int | None = Field(None, ge=0, description="Absolute byte offset; artifact reads start at 0 without one.")
    limit: int | None = Field(None, ge=1, description="Window size in bytes: default 16384, clamped to 51200.")


class BgTool(Tool):
    name = "bg"
    description = (
        "Inspect or cancel background commands, and page output kept out of the transcript. "
        'action "artifact" reads a window of withheld output by outputPath; pass the returned cursor to continue.'
    )
    Args = BgArgs
    declarations = READ_ONLY_PARALLEL
    action_effects: ClassVar[Mapping[str, Effect]] = {"artifact": Effect.ReadOnly}

    async def run(self, ctx: ToolContext, args: BgArgs) -> ToolOutput:
        return await self.artifact(ctx, args)

    async def artifact(self, ctx: ToolContext, args: BgArgs) -> ToolOutput:
        if not args.outputPath:
            raise Refused(
                BlockKind.invalid_arguments,
                "argument 'outputPath' is required for action \"artifact\": pass the path the notice named.",
            )
        path = ctx.workspace.resolve(args.outputPath, field="outputPath")
        shown = ctx.workspace.display(path)
        if ctx.store.artifact(shown) is None:
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'outputPath': {args.outputPath!r} is not an artifact Zuno saved. "
                "Use the outputPath from a withheld-output notice (metadata.withheldOutput.outputPath).",
            )
        try:
            w = read_window(path, args.cursor, args.limit)
        except OSError as e:
            return ToolOutput.failure(f"artifact {shown} cannot be read ({e.strerror}); it may have been removed.")
        head = (
            f"[artifact {shown}: bytes {w.window_from}-{w.cursor} of {w.total}; "
            f"hasMore: {str(w.has_more).lower()}"
            + (f", next cursor: {w.cursor}" if w.has_more else "")
            + f"; hasEarlier: {str(w.has_earlier).lower()}]"
        )
        return ToolOutput(
            text=w.text(), head=head, raw=w.data, bounded=True, metadata={"outputPath": shown, **w.facts()}
        )


def register(registry: Registry) -> None:
    registry.add("bg", BgTool, profiles=("zuno",))

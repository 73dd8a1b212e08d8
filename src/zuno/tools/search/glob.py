"""glob: paths by glob pattern, found by ``rg --files``, in a stable order, bounded."""

from __future__ import annotations

from pydantic import Field

from zuno.declarations import READ_ONLY_PARALLEL
from zuno.tool import Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.search.base import (
    NO_FILES,
    anchor_glob,
    check_exec,
    check_failure,
    check_glob,
    common_flags,
    exclusion_globs,
    execute,
    filter_args,
    find_rg,
    plan,
    resolve_roots,
    rg_facts,
    rule_scope,
    search_subject_forms,
)
from zuno.tools.search.collect import Drops
from zuno.tools.search.glob_collect import GlobCollector, glob_listing
from zuno.workspace import Workspace


class GlobArgs(ToolArgs):
    pattern: str = Field(
        min_length=1,
        description='gitignore style, relative to path: "*.py" at any depth, "src/**/*.ts" anchored',
    )
    path: str | None = Field(None, description="Directory (default: the workspace root)")


def truncation_note(drops: Drops, shown: int, total: int, noun: str, advice: str) -> str:
    parts: list[str] = []
    if drops.over_cap:
        parts.append(f"showing the first {shown} of {total} {noun} in path order. {advice}")
    if drops.unnameable:
        parts.append(
            f"{drops.unnameable} {noun} left out because the file name is not valid UTF-8 and cannot be named "
            "(rename the file to find it)"
        )
    if drops.oversized:
        parts.append(f"{drops.oversized} rg record(s) over 1 MiB skipped")
    return f"[truncated: {'; '.join(parts)}]" if parts else ""


class GlobTool(Tool):
    name = "glob"
    description = (
        "Find files by glob (ripgrep): sorted paths relative to the workspace root. Honours .gitignore/.ignore, "
        "includes hidden files, skips .git and .zuno; says 'truncated' when paths were left out."
    )
    Args = GlobArgs
    declarations = READ_ONLY_PARALLEL

    def subject(self, args: ToolArgs) -> str | None:
        """The path, read directly: what Tool.subject's search finds, as GlobArgs (which refuses
        unknown fields) has no other subject field, without its failed attribute lookups."""
        return args.path if isinstance(args, GlobArgs) else super().subject(args)

    def subject_forms(self, args: ToolArgs, workspace: Workspace) -> tuple[str, ...]:
        path = args.path if isinstance(args, GlobArgs) else None
        return search_subject_forms(super().subject_forms(args, workspace), workspace, (path or ".",))

    async def run(self, ctx: ToolContext, args: GlobArgs) -> ToolOutput:
        check_glob("pattern", args.pattern)
        roots = resolve_roots(ctx, [args.path or "."], "path", dirs_only=True)
        pattern = anchor_glob(ctx, "pattern", args.pattern, roots)
        rg = await find_rg(ctx)
        if isinstance(rg, ToolOutput):
            return rg
        the_plan = plan(ctx, roots, dirs=True)
        cap = ctx.config.search.glob_max_results
        col = GlobCollector(cap)
        # One directory: no path at all, so rg lists its working directory without the "./" that
        # would be stripped off every path again (--files never reads stdin, which is /dev/null),
        # and no path is searched for one.
        paths_args = the_plan.args
        if paths_args == ["."]:
            paths_args, the_plan.strip_dot = [], False
        argv = [*common_flags(ctx), "--files", *filter_args([pattern]), *exclusion_globs()]
        # Permission rules over what is found (none: nothing is done): subtrees rg does not enter,
        # and a filter by path of the rest before it is counted.
        scope = rule_scope(ctx, roots, the_plan, "path")
        flt = scope.glob_filter(col.feed) if scope is not None else None
        if scope is not None:
            argv += scope.globs
        argv += ["--", *paths_args]
        check_exec(rg, argv, {"pattern": [args.pattern], "path": the_plan.args})
        res = await execute(ctx, rg, argv, the_plan, col.feed if flt is None else flt.feed)
        if isinstance(res, ToolOutput):
            return res
        if flt is not None:
            flt.finish()
        joined = col.finish_joined()
        failed = check_failure(
            res,
            the_plan,
            found_anything=bool(joined) or col.drops.unnameable > 0,
            pattern=args.pattern,
            pattern_field="pattern",
            globs={"pattern": [pattern]},
        )
        if failed is not None:
            return failed
        # The paths are displayed, split and listed from one joined text (no NUL is in a path).
        joined = the_plan.display_joined(joined) if joined else ""
        shown = joined.split("\0") if joined else []
        total = col.total
        rules_note = ""
        if scope is not None:
            kept = scope.keep_paths(shown)
            if len(kept) != len(shown):  # the last layer: a path a translated rule should have left out
                total -= len(shown) - len(kept)
                shown = kept
                joined = "\0".join(kept)
            rules_note = scope.note()
        note = truncation_note(col.drops, len(shown), total, "paths", "Narrow the pattern or the path.")
        metadata = {
            "paths": shown,
            "count": len(shown),
            "total": total,
            "truncated": col.drops.any,
            "dropped": col.drops.facts(),
            "rg": rg_facts(rg, res),
        }
        if rules_note:
            metadata["leftOutByRules"] = scope.facts() if scope is not None else []
            note = f"{note}\n{rules_note}" if note else rules_note
        body = glob_listing(joined, shown) if shown else NO_FILES
        return ToolOutput(text=body, tail=note, metadata=metadata)

"""grep: content search by regex with rg, for the zuno profile (pattern, path, include) and the
chord profile (pattern, paths, includes, context_lines)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from zuno import limits
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.search import chord_format
from zuno.tools.search.base import (
    NO_FILES,
    anchor_glob,
    check_exec,
    check_failure,
    check_glob,
    check_text,
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
from zuno.tools.search.collect import FileHits, GrepCollector, quote_paths, shown_controls
from zuno.tools.search.glob import truncation_note
from zuno.tools.search.rg import RgResult, pattern_error
from zuno.tools.search.rg_discovery import Rg
from zuno.tools.search.rules import RuleScope
from zuno.workspace import Workspace

_PATTERN_HELP = "Rust regex (ripgrep), case-sensitive unless (?i); escape ( [ { . * + ? | \\ for literals"


class GrepArgs(ToolArgs):
    pattern: str = Field(min_length=1, description=_PATTERN_HELP)
    path: str | None = Field(None, description="File or directory (default: the workspace root)")
    include: str | None = Field(None, min_length=1, description='Only files matching this glob, e.g. "*.{ts,tsx}"')


class ChordGrepArgs(ToolArgs):
    pattern: str = Field(min_length=1, description=_PATTERN_HELP)
    paths: list[str] | None = Field(
        None, description="Root files or directories to search (default, or empty: the workspace)."
    )
    includes: list[str] | None = Field(None, description='Only search files matching any of these globs ("*.go").')
    context_lines: int | None = Field(
        None,
        ge=0,
        description=f"Lines of context around each hit, 0..{limits.CHORD_CONTEXT_MAX} (default "
        f"{limits.CHORD_CONTEXT_DEFAULT}); larger values are clamped.",
    )


def _names_cr(stderr: bytes) -> bool:
    perr = pattern_error(stderr)
    return perr is not None and perr.kind == "cr"


def _hit_summary(files: list[FileHits]) -> tuple[int, int]:
    return sum(f.hits for f in files), len(files)


async def _search(
    ctx: ToolContext,
    pattern: str,
    raw_paths: list[str],
    path_field: str,
    includes: list[str],
    include_field: str,
    context: int,
    *,
    plain: bool = False,
) -> tuple[Rg, GrepCollector, list[FileHits], RgResult, RuleScope | None] | ToolOutput:
    check_text("pattern", pattern, regex=True)
    for g in includes:
        check_glob(include_field, g, path_field)
        if not g:
            raise Refused(BlockKind.invalid_arguments, f"argument '{include_field}': an empty glob matches nothing.")
    roots = resolve_roots(ctx, raw_paths, path_field, dirs_only=False)
    includes = [anchor_glob(ctx, include_field, g, roots) for g in includes]
    rg = await find_rg(ctx)
    if isinstance(rg, ToolOutput):
        return rg
    the_plan = plan(ctx, roots)
    col = GrepCollector(ctx.config.search.grep_max_hits, context)
    # --crlf: a CRLF file's lines end before their "\r\n", as read shows them, so "x$" finds "x\r\n".
    argv = [*common_flags(ctx), "--line-number", "--with-filename", "--no-heading", "--no-context-separator", "--crlf"]
    if context:
        argv += ["--context", str(context)]
    argv += filter_args(includes)
    argv += exclusion_globs()
    # Permission rules over what is found (none: nothing is done): subtrees rg does not enter, and
    # a filter by path of the rest before it is counted.
    scope = rule_scope(ctx, roots, the_plan, path_field)
    if scope is not None:
        argv += scope.globs
    argv += ["--regexp", pattern, "--", *the_plan.args]
    check_exec(rg, argv, {"pattern": [pattern], include_field: includes, path_field: the_plan.args})
    flt = scope.grep_filter(col.feed) if scope is not None else None
    res = await execute(ctx, rg, argv, the_plan, col.feed if flt is None else flt.feed)
    if isinstance(res, ToolOutput):
        return res
    if res.returncode == 2 and _names_cr(res.stderr):
        # A pattern that names "\r" itself (looking for CRLF files, say) is refused under --crlf,
        # where "\r" is part of the line terminator: it is searched as rg searches by default.
        argv.remove("--crlf")
        col = GrepCollector(ctx.config.search.grep_max_hits, context)
        flt = scope.grep_filter(col.feed) if scope is not None else None
        res = await execute(ctx, rg, argv, the_plan, col.feed if flt is None else flt.feed)
        if isinstance(res, ToolOutput):
            return res
    if flt is not None:
        flt.finish()
    files = col.finish(plain=plain)
    failed = check_failure(
        res,
        the_plan,
        found_anything=col.total_hits > 0,
        pattern=pattern,
        pattern_field="pattern",
        globs={include_field: includes},
    )
    if failed is not None:
        return failed
    for f in files:
        f.path = the_plan.display(f.path)
    if scope is not None:
        kept = [f for f in files if not scope.covers(f.path)]
        if len(kept) != len(files):  # the last layer: a file a translated rule should have left out
            col.total_hits -= sum(f.hits for f in files if f not in kept)
            files = kept
    return rg, col, files, res, scope


def _rules_note(scope: RuleScope | None, meta: dict[str, Any]) -> str:
    """The status line saying permission rules left paths out (and ``metadata.leftOutByRules``)."""
    if scope is None:
        return ""
    note = scope.note()
    if note:
        meta["leftOutByRules"] = scope.facts()
    return note


def _metadata(rg: Rg, res: RgResult, col: GrepCollector, files: list[FileHits]) -> dict[str, Any]:
    hits, nfiles = _hit_summary(files)
    capped = sum(1 for f in files for ln in f.lines if ln.hit and ln.capped)
    return {
        "matches": hits,
        "totalMatches": col.total_hits,
        "files": nfiles,
        "truncated": col.drops.any,
        "dropped": col.drops.facts(),
        "linesCapped": capped,
        "rg": rg_facts(rg, res),
    }


def _nothing(col: GrepCollector) -> str:
    """The body when no line is shown: "No files found", unless a binary file named as the path
    matched (its status line says so; "No files found" above it would contradict it)."""
    return "" if col.drops.binary else NO_FILES


def _capped_note(n: int, binary: int = 0) -> str:
    notes = []
    if n:
        notes.append(
            f"[{n} matching line(s) longer than {limits.MATCH_LINE_MAX_UTF16} UTF-16 code units were cut there]"
        )
    if binary:
        notes.append(f"[{binary} binary file(s) named in the search path matched; binary lines are not shown]")
    return "\n".join(notes)


class GrepTool(Tool):
    name = "grep"
    description = (
        "Search file contents by regex (ripgrep): sorted `path:line:text` lines. Honours .gitignore/.ignore, "
        "includes hidden files, skips binary files, .git and .zuno; says 'truncated' when matches were left out."
    )
    Args = GrepArgs
    declarations = READ_ONLY_PARALLEL

    def subject_forms(self, args: ToolArgs, workspace: Workspace) -> tuple[str, ...]:
        path = getattr(args, "path", None)
        return search_subject_forms(super().subject_forms(args, workspace), workspace, (path or ".",))

    async def run(self, ctx: ToolContext, args: GrepArgs) -> ToolOutput:
        found = await _search(
            ctx,
            args.pattern,
            [args.path or "."],
            "path",
            [args.include] if args.include else [],
            "include",
            0,
            plain=True,
        )
        if isinstance(found, ToolOutput):
            return found
        rg, col, files, res, scope = found
        meta = _metadata(rg, res, col, files)
        rows: list[str] = []
        for f, q in zip(files, quote_paths([f.path for f in files]), strict=True):  # once per file, not per line
            if f.plain:  # `number:text` lines: the rows are the path, a colon and each of them
                rows.append(q + ":" + shown_controls(f.plain).replace("\n", "\n" + q + ":"))
            rows += [chord_format.hit_line(q, ln.number, ln.text) for ln in f.lines if ln.hit]
        note = truncation_note(
            col.drops, meta["matches"], col.total_hits, "matches", "Narrow the pattern, the path or the include glob."
        )
        ruled = _rules_note(scope, meta)
        tail = "\n".join(x for x in (_capped_note(meta["linesCapped"], col.drops.binary), note, ruled) if x)
        return ToolOutput(text="\n".join(rows) if rows else _nothing(col), tail=tail, metadata=meta)


class ChordGrepTool(Tool):
    name = "grep"
    description = (
        "Search file contents by regex (ripgrep) under one or more `paths`, optionally only files matching "
        "`includes` globs, with optional `context_lines` (0-20). Hit lines print as `path:line:text`, context lines "
        "as `| path-line-text`; paths with whitespace or an ambiguous separator are quoted. Output is bounded."
    )
    Args = ChordGrepArgs
    declarations = READ_ONLY_PARALLEL

    def subject(self, args: ToolArgs) -> str | None:
        paths = getattr(args, "paths", None)
        return paths[0] if paths else None

    def subject_paths(self, args: ToolArgs) -> tuple[str, ...]:
        return tuple(getattr(args, "paths", None) or ())

    def subject_forms(self, args: ToolArgs, workspace: Workspace) -> tuple[str, ...]:
        roots = self.subject_paths(args) or (".",)
        return search_subject_forms(super().subject_forms(args, workspace), workspace, roots)

    async def run(self, ctx: ToolContext, args: ChordGrepArgs) -> ToolOutput:
        asked = args.context_lines if args.context_lines is not None else limits.CHORD_CONTEXT_DEFAULT
        context = min(asked, limits.CHORD_CONTEXT_MAX)
        head = (
            f"[notice: context_lines {asked} is over the maximum {limits.CHORD_CONTEXT_MAX}; clamped to {context}]"
            if asked > context
            else ""
        )
        includes = list(args.includes or [])
        found = await _search(ctx, args.pattern, list(args.paths or ["."]), "paths", includes, "includes", context)
        if isinstance(found, ToolOutput):
            return found
        rg, col, files, res, scope = found
        meta = _metadata(rg, res, col, files)
        meta["contextLines"] = context
        if asked > context:
            meta["contextClamped"] = {"asked": asked, "used": context}
        lim = ctx.config.tool_output
        budget_bytes = max(0, lim.max_bytes - limits.CHORD_BUDGET_RESERVE_BYTES)
        budget_lines = max(0, lim.max_lines - limits.CHORD_BUDGET_RESERVE_LINES)
        r = chord_format.render(files, budget_bytes, budget_lines)
        meta["contextShown"] = r.context_shown
        meta["contextOmitted"] = r.context_omitted
        note = truncation_note(
            col.drops, meta["matches"], col.total_hits, "matches", "Narrow the pattern, the paths or the includes."
        )
        ruled = _rules_note(scope, meta)
        tail = "\n".join(
            x for x in (_capped_note(meta["linesCapped"], col.drops.binary), r.closing, note, ruled) if x
        )
        return ToolOutput(text="\n".join(r.lines) if r.lines else _nothing(col), head=head, tail=tail, metadata=meta)

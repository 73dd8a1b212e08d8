"""apply_patch: validate every file of a patch, compute every new content in memory, then write.

Pre-flight, under the workspace's mutation lock: every path is resolved and checked; every
existing source of an update, delete or move (and an existing move destination, or an existing
Add target) needs a read receipt that still matches the file; the same operation against the
same content is an IdenticalReplay; every chunk must match the current logical lines. Any
conflict or problem leaves every file unchanged. Only then are files written, each through a
temporary file and an atomic rename. A failure after the first write is ``uncertain`` and names
the paths observed as changed.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import Field

from zuno import family_migrations, safefs
from zuno.declarations import BlockKind, Declarations
from zuno.permissions import decide
from zuno.receipts import Conflict, changed_on_write, check_fresh, read_call, record_read, sha256_hex
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools import control_pictures
from zuno.tools.file_scan import (
    in_thread,
    links_metadata,
    normalization_twin,
    not_a_file,
    read_current,
    refuse_directory_name,
    twin_note,
)
from zuno.tools.patch import textfile
from zuno.tools.patch.grammar import Chunk, FileOp, PatchSyntaxError, digest, first_path, parse
from zuno.tools.patch.matcher import LEVEL_NAMES, Matcher
from zuno.tools.patch.retry import closest, copied_wrong, without_final_blank
from zuno.tools.search.collect import quote_path
from zuno.workspace import STATE_DIR

ABSENT = "absent"

MIGRATIONS = family_migrations.PATCH  # (the SQL: zuno.family_migrations)


# -- the durable table of operation digests ---------------------------------------------------


def remember(
    ctx: ToolContext, resource: Path, op_digest: str, content: str, role: str, outcome: str, tool: str
) -> None:
    ctx.store.execute(
        "INSERT OR REPLACE INTO patch_ops VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ctx.session_id, str(resource), op_digest, content, role, outcome, tool, ctx.call_seq, time.time()),
    )


def replay_conflict(ctx: ToolContext, resource: Path, op_digest: str, current: str) -> Conflict | None:
    rows = ctx.store.query(
        "SELECT role, outcome, call_seq FROM patch_ops WHERE session_id = ? AND resource = ? AND op_digest = ?"
        " AND content_sha256 = ?",
        (ctx.session_id, str(resource), op_digest, current),
    )
    if not rows:
        return None
    r = rows[0]
    if r["outcome"] == "applied" and r["role"] == "after":
        why = "this exact operation was already applied and produced the current content"
    elif r["outcome"] == "applied":
        why = "this exact operation was already applied to this exact content once"
    else:
        why = f"this exact operation already failed against this exact content ({r['outcome']})"
    return Conflict(
        "IdenticalReplay",
        ctx.workspace.display(resource),
        op_digest,
        None if current == ABSENT else current,
        detail=f"{why} (call #{r['call_seq']})",
    )


# -- writing -----------------------------------------------------------------------------------


def in_state_dir(ctx: ToolContext, path: Path) -> bool:
    sd = ctx.workspace.state_dir
    return path == sd or path.is_relative_to(sd)


def snapshot(where: safefs.Target) -> bytes | None:
    """What is there now, for telling what a failed write changed (None: nothing readable)."""
    try:
        return read_current(where)[0]
    except (OSError, Refused):
        return None


# -- the plan of one patch ---------------------------------------------------------------------


def _what(op: FileOp) -> str:
    """An operation's kind, as the patch spells it (for messages)."""
    if op.kind == "update" and op.move_to:
        return "'*** Update File' with '*** Move to'"
    return {"add": "'*** Add File'", "delete": "'*** Delete File'", "update": "'*** Update File'"}[op.kind]


@dataclass
class Planned:
    op: FileOp
    index: int  # 1-based file operation number
    source: Path
    dest: Path | None  # move destination
    op_digest: str
    where: safefs.Target  # how source is opened (no link followed)
    dest_where: safefs.Target | None = None
    dest_before: bytes | None = None  # an existing move destination's bytes
    before: bytes | None = None
    before_digest: str = ABSENT
    after: bytes | None = None  # new content of (dest or source); None for a delete
    mode: int | None = None
    source_stat: os.stat_result | None = None  # the existing source as checked (a move keeps its attributes)
    level: int = 0
    chunks_at: list[int] = field(default_factory=list)

    @property
    def target(self) -> Path:
        return self.dest or self.source

    @property
    def target_where(self) -> safefs.Target:
        return self.dest_where or self.where


class ApplyPatchArgs(ToolArgs):
    patch: str = Field(
        description="'*** Begin Patch', then per file '*** Add File: <path>' (lines '+text'), '*** Delete File: "
        "<path>', or '*** Update File: <path>' (optional '*** Move to: <path>') with '@@ <anchor>' chunks of "
        "' context', '-old', '+new' lines; then '*** End Patch'"
    )


DESCRIPTION = (
    "Localized, context-verified edits: add, update, delete or move files. A file updated, deleted or moved "
    "(and an existing move destination) must be read in this session in its current state. All or nothing. "
    "Give chunks 2-3 unchanged context lines, and an '@@ <line>' anchor (function or class line) when the "
    "context is not unique."
)


class ApplyPatchTool(Tool):
    name = "apply_patch"
    description = DESCRIPTION
    Args = ApplyPatchArgs
    declarations = Declarations()  # SideEffecting, Never, Exclusive

    def subject(self, args: ToolArgs) -> str | None:
        return first_path(getattr(args, "patch", ""))

    def subject_paths(self, args: ToolArgs) -> tuple[str, ...]:
        first = self.subject(args)
        return (first,) if first is not None else ()

    async def run(self, ctx: ToolContext, args: ApplyPatchArgs) -> ToolOutput:
        try:
            ops = parse(args.patch)
        except PatchSyntaxError as e:
            raise Refused(BlockKind.invalid_arguments, f"argument 'patch': invalid patch at {e}.", line=e.line) from e
        self._check_permissions(ctx, ops)
        plans = self._resolve(ctx, ops)
        patch_digest = digest([p.op_digest for p in plans])
        async with ctx.workspace.mutation_lock:
            conflicts, problems = await self._preflight(ctx, plans)
            if conflicts or problems:
                return self._refuse(ctx, plans, conflicts, problems, patch_digest)
            return await self._write(ctx, plans, patch_digest)

    def _check_permissions(self, ctx: ToolContext, ops: list[FileOp]) -> None:
        """The dispatcher matched permission patterns against the first path only (the call's
        subject); every other path a patch names gets the same rules here. A rule that asks cannot
        be asked from inside the call, so such a path must go in a patch of its own."""
        first = ops[0].path if ops else None
        for op in ops:
            for raw in (op.path, op.move_to):
                if raw is None or raw == first:
                    continue
                verdict = decide(ctx.config.permission, self.name, raw, self.declarations)
                if verdict.action == "deny" or (verdict.action == "ask" and verdict.rule is not None):
                    raise Refused(
                        BlockKind.denied,
                        f"argument 'patch': {raw!r} (line {op.line}): {verdict.reason}. Nothing was written"
                        + (
                            "; send that file in a patch of its own so it can be approved."
                            if verdict.action == "ask"
                            else "."
                        ),
                    )

    # -- resolve (nothing touched yet) ---------------------------------------------------------

    def _resolve(self, ctx: ToolContext, ops: list[FileOp]) -> list[Planned]:
        plans: list[Planned] = []
        seen: dict[Path, tuple[int, FileOp]] = {}
        for n, op in enumerate(ops, 1):
            for raw in (op.path, op.move_to):
                if raw is not None:
                    rule = f"apply_patch changes files only (operation {n}, line {op.line})"
                    refuse_directory_name(raw, "patch", rule)
            src = ctx.resolve(op.path, field="patch")
            dest = ctx.resolve(op.move_to, field="patch") if op.move_to else None
            if dest == src:
                dest = None
            if (op.kind == "delete" or dest is not None) and given_path(ctx, op.path).is_symlink():
                what = "delete" if op.kind == "delete" else "move"
                raise Refused(
                    BlockKind.invalid_arguments,
                    f"argument 'patch': {op.path!r} (operation {n}, line {op.line}) is a symbolic link; a {what} "
                    "would act on the file it points to and leave the link dangling. Name the real file.",
                )
            for p, raw in ((src, op.path), (dest, op.move_to)):
                if p is None:
                    continue
                if in_state_dir(ctx, p):
                    raise Refused(
                        BlockKind.denied,
                        f"argument 'patch': {raw!r} (operation {n}, line {op.line}) is inside Zuno's state folder "
                        f"{STATE_DIR}/, which tools do not write.",
                    )
                if p in seen:
                    first, first_op = seen[p]
                    both_updates = first_op.kind == op.kind == "update" and not first_op.move_to and not op.move_to
                    fix = (
                        "Merge the chunks into one '*** Update File' section."
                        if both_updates
                        else f"Keep one operation on it (operation {first} is {_what(first_op)}, operation {n} "
                        f"{_what(op)}), and send the other in a later call if it is still needed."
                    )
                    raise Refused(
                        BlockKind.invalid_arguments,
                        f"argument 'patch': {ctx.workspace.display(p)} is named by operations {first} and {n}; "
                        f"a patch touches each file once. {fix}",
                    )
                seen[p] = (n, op)
            canonical = op.canonical(str(src), str(dest) if dest else None)
            where = ctx.workspace.target(src, field="patch")
            dest_where = ctx.workspace.target(dest, field="patch") if dest is not None else None
            plans.append(Planned(op, n, src, dest, digest(canonical), where, dest_where))
        return plans

    # -- pre-flight: every file validated, every new content computed -------------------------

    async def _preflight(self, ctx: ToolContext, plans: list[Planned]) -> tuple[list[Conflict], list[str]]:
        conflicts: list[Conflict] = []
        problems: list[str] = []
        for plan in plans:
            op, src = plan.op, plan.source
            shown = ctx.workspace.display(src)
            where = f"operation {plan.index} (line {op.line})"
            parent_is_file = False
            try:
                current, st = await in_thread(lambda _stop, t=plan.where: read_current(t))
            except NotADirectoryError:
                current, st, parent_is_file = None, None, True
            except OSError as e:
                problems.append(f"{where}: " + not_a_file(shown, e, "apply_patch changes files only"))
                continue
            plan.before = current
            cur_digest = sha256_hex(current) if current is not None else ABSENT
            plan.before_digest = cur_digest
            replay = replay_conflict(ctx, src, plan.op_digest, cur_digest)
            if replay is not None:
                conflicts.append(replay)
                continue
            if op.kind == "add":
                if current is not None:
                    c = check_fresh(ctx, src, current, plan.op_digest)
                    if c is not None:
                        conflicts.append(_explain_add(c))
                        continue
                    plan.mode = stat.S_IMODE(st.st_mode) if st is not None else None
                    if not await in_thread(lambda _stop, t=plan.where: safefs.writable(t)):
                        problems.append(f"{where}: {_write_protected(shown)}")
                        continue
                    tf = textfile.decode(current)
                    bom, style = tf.bom, tf.style
                else:
                    bom, style = False, textfile.LF
                    if parent_is_file:
                        problems.append(f"{where}: a parent of {shown} exists and is not a directory.")
                        continue
                lines = op.add_lines
                eols = textfile.finalize(lines, [None] * len(lines), style, True)
                data = _encode_new(bom, lines, eols)
                if data is None:
                    problems.append(f"{where}: the text for {shown} holds a lone surrogate, which no byte can carry.")
                    continue
                plan.after = data
                continue
            if current is None:
                verb = "delete" if op.kind == "delete" else "update"
                twin = None if parent_is_file else await in_thread(lambda _stop, t=plan.where: normalization_twin(t))
                if twin is not None:
                    problems.append(f"{where}: cannot {verb} {shown}: no such file; {twin_note(shown, twin)}.")
                    continue
                problems.append(
                    f"{where}: cannot {verb} {shown}: no such file. Use '*** Add File: {op.path}' to create it."
                    if op.kind == "update"
                    else f"{where}: cannot {verb} {shown}: no such file."
                )
                continue
            c = check_fresh(ctx, src, current, plan.op_digest)
            if c is not None:
                conflicts.append(c)
                continue
            plan.source_stat = st
            plan.mode = stat.S_IMODE(st.st_mode) if st is not None else None
            if op.kind == "delete":
                continue
            replaced = plan.dest_where if plan.dest is not None else plan.where
            if replaced is not None and not await in_thread(lambda _stop, t=replaced: safefs.writable(t)):
                problems.append(f"{where}: {_write_protected(ctx.workspace.display(plan.target))}")
                continue
            # update (and move)
            kind = textfile.not_text(current)
            if kind is not None:
                problems.append(
                    f"{where}: {shown} is {kind}; '*** Update File' changes UTF-8 text only. Replace it whole "
                    "with write (or '*** Add File'), or convert it with shell first."
                )
                continue
            if plan.dest is not None and plan.dest_where is not None:
                dshown = ctx.workspace.display(plan.dest)
                try:
                    dcur, _ = await in_thread(lambda _stop, t=plan.dest_where: read_current(t))
                except NotADirectoryError:
                    problems.append(f"{where}: a parent of the move destination {dshown} is not a directory.")
                    continue
                except OSError as e:
                    why = not_a_file(dshown, e, "a move replaces files only")
                    problems.append(f"{where}: the move destination {why}")
                    continue
                plan.dest_before = dcur
                if dcur is not None:
                    c = check_fresh(ctx, plan.dest, dcur, plan.op_digest)
                    if c is not None:
                        conflicts.append(
                            replace(
                                c,
                                detail=c.detail + " (it is the existing destination of a move, which it would replace)",
                            )
                        )
                        continue
            result = self._apply_chunks(ctx, plan, current)
            if isinstance(result, Conflict):
                conflicts.append(result)
                remember(ctx, src, plan.op_digest, cur_digest, "before", "ContextMismatch", self.name)
            elif isinstance(result, str):
                problems.append(f"{where}: {result}")
            else:
                plan.after = result
        return conflicts, problems

    def _apply_chunks(self, ctx: ToolContext, plan: Planned, current: bytes) -> bytes | Conflict | str:
        tf = textfile.decode(current)
        lines = tf.lines
        chunks = _from_shown_crs(plan.op.chunks, lines)
        wanted = {t for c in chunks for t in c.old}
        wanted.update(c.title for c in chunks if c.title is not None)
        matcher = Matcher(lines, wanted)
        cursor = 0
        placed: list[tuple[int, int, Chunk]] = []
        shown = ctx.workspace.display(plan.source)
        cur_digest = plan.before_digest

        def mismatch(chunk: Chunk, detail: str, near: int) -> Conflict:
            """``near``: 0-based line the re-read should show (the read starts a few lines above)."""
            return Conflict(
                "ContextMismatch",
                shown,
                plan.op_digest,
                cur_digest,
                hunk={"number": chunk.number, "title": chunk.title, "patchLine": chunk.line, "operation": plan.index},
                detail=detail,
                suggested_call=read_call(shown, max(0, min(near, len(lines) - 1)) - 4),
            )

        for chunk in chunks:
            region = cursor
            if chunk.title is not None:
                at, _ = matcher.find([chunk.title], cursor)
                if not at:
                    return mismatch(
                        chunk, f"its anchor line {chunk.title!r} is not in the file from line {cursor + 1} on", cursor
                    )
                region = at[0] + 1
            old = chunk.old
            if chunk.title is not None and old and old[0].strip() == chunk.title.strip():
                region -= 1  # the anchor repeated as the chunk's first context line
            if not old:
                pos = len(lines) if chunk.end_of_file or chunk.title is None else region
                placed.append((pos, 0, chunk))
                cursor = pos
                continue
            unique = chunk.title is None
            found, level = matcher.find(old, region, at_end=chunk.end_of_file, want=2 if unique else 1)
            if not found:
                retried = without_final_blank(matcher, chunk, region, unique)
                if retried is not None:
                    chunk, found, level = retried
                    old = chunk.old
            if not found:
                where = "at the end of the file" if chunk.end_of_file else f"from line {region + 1} on"
                hint, near = closest(matcher, old, region)
                hint = copied_wrong(old, lines, region) + hint
                return mismatch(
                    chunk,
                    f"its {len(old)} context/removed line(s) starting {old[0]!r} do not match the current file {where}"
                    + hint,
                    near if near >= 0 else region,
                )
            if len(found) > 1:
                return mismatch(chunk, _ambiguous(lines, cursor, found[0], found[1]), found[0])
            plan.level = max(plan.level, level)
            placed.append((found[0], len(old), chunk))
            plan.chunks_at.append(found[0] + 1)
            cursor = found[0] + len(old)
        out_lines: list[str] = []
        out_eols: list[str | None] = []
        prev = 0
        for start, length, chunk in placed:
            out_lines.extend(lines[prev:start])
            out_eols.extend(tf.eols[prev:start])
            _replay_chunk(chunk.ops, start, lines, tf.eols, out_lines, out_eols)
            prev = start + length
        out_lines.extend(lines[prev:])
        out_eols.extend(tf.eols[prev:])
        eols = textfile.finalize(out_lines, out_eols, tf.style, tf.final_newline)
        data = _encode_new(tf.bom, out_lines, eols)
        if data is None:
            return f"the new text for {shown} holds a lone surrogate, which no byte can carry."
        return data

    # -- outcomes ------------------------------------------------------------------------------

    def _refuse(
        self,
        ctx: ToolContext,
        plans: list[Planned],
        conflicts: list[Conflict],
        problems: list[str],
        patch_digest: str,
    ) -> ToolOutput:
        parts: list[str] = []
        for c in conflicts:
            where = ""
            if c.hunk:
                where = f" (hunk {c.hunk['number']}" + (f" {c.hunk['title']!r})" if c.hunk.get("title") else ")")
            nxt = f" Next: read {json.dumps(c.suggested_call['arguments'])}" if c.suggested_call else ""
            parts.append(
                f"[conflict: {c.kind}] {c.resource}{where}: {c.detail}. Required action: {c.required_action}{nxt}"
            )
        parts.extend(f"[problem] {p}" for p in problems)
        text = (
            f"apply_patch: nothing was written ({len(plans)} file operation(s) checked; "
            f"{len(conflicts)} conflict(s), {len(problems)} problem(s)).\n" + "\n".join(parts)
        )
        meta: dict[str, Any] = {"patchDigest": patch_digest, "writtenPaths": []}
        if conflicts:
            meta["conflict"] = conflicts[0].to_metadata()
            meta["conflicts"] = [c.to_metadata() for c in conflicts]
        if problems:
            meta["problems"] = problems
        return ToolOutput.failure(text, **meta)

    async def _write(self, ctx: ToolContext, plans: list[Planned], patch_digest: str) -> ToolOutput:
        """Write every planned file. An update rewrites a file with hard links in place (every name
        shows it); a move writes a new file at the destination and removes the source's name, so
        the source's other hard links keep its old content, as after ``mv`` and a rewrite. Each
        file is checked, on the descriptor about to be written, to be what preflight read."""
        originals: dict[Path, tuple[safefs.Target, bytes | None]] = {}
        for plan in plans:
            originals[plan.source] = (plan.where, plan.before)
            if plan.dest is not None and plan.dest_where is not None:
                originals[plan.dest] = (plan.dest_where, plan.dest_before)
        writes: list[tuple[Planned, safefs.Target, bytes, tuple[safefs.Target, os.stat_result] | None, str]] = []
        removals: list[safefs.Target] = []
        for plan in plans:
            if plan.op.kind == "delete":
                removals.append(plan.where)
            else:
                assert plan.after is not None
                st = plan.source_stat
                if plan.dest is not None:  # a move: a new file at the destination (see _write's docs)
                    like = (plan.where, st) if st is not None else None
                    before = plan.dest_before
                    expect = sha256_hex(before) if before is not None else ABSENT
                    writes.append((plan, plan.target_where, plan.after, like, expect))
                    removals.append(plan.where)
                else:
                    writes.append((plan, plan.where, plan.after, None, plan.before_digest))
        done: dict[Path, safefs.Written] = {}
        changed_at: list[Planned] = []

        def apply(_stop: object) -> None:
            for plan, where, data, like, expect in writes:  # write protection: checked in preflight
                try:
                    done[plan.target] = safefs.atomic_write(
                        where, data, plan.mode, like=like, keep_links=like is None and plan.dest is None, expect=expect
                    )
                except safefs.Changed:
                    changed_at.append(plan)
                    raise
            for where in removals:
                safefs.unlink(where)

        def observe(_stop: object) -> tuple[list[str], list[str]]:
            changed = [ctx.workspace.display(p) for p, (t, orig) in originals.items() if snapshot(t) != orig]
            present = [ctx.workspace.display(p) for p, (t, _) in originals.items() if safefs_present(t)]
            return changed, [s for s in changed if s in present]

        try:
            await in_thread(apply)
        except Exception as e:  # I/O once writing began: observe what changed
            if isinstance(e, safefs.Changed) and not done and changed_at:  # found before any write
                plan = changed_at[0]
                c = changed_on_write(ctx, plan.target, e.digest, plan.op_digest)
                return self._refuse(ctx, plans, [c], [], patch_digest)
            changed, present = await in_thread(observe)
            if not changed:
                return ToolOutput.failure(
                    f"apply_patch: writing failed ({type(e).__name__}: {e}) and no file was observed as changed; "
                    "nothing was written. Fix the cause before sending the patch again.",
                    writtenPaths=[],
                    observedChanged=[],
                    patchDigest=patch_digest,
                    error=f"{type(e).__name__}: {e}",
                )
            return ToolOutput.uncertain(
                f"apply_patch: writing failed after it began ({type(e).__name__}: {e}). "
                f"Paths observed as changed: {', '.join(changed) if changed else '(none)'}. "
                "Inspect them (read) before any new mutation; do not resend this patch.",
                writtenPaths=present,
                observedChanged=changed,
                patchDigest=patch_digest,
                error=f"{type(e).__name__}: {e}",
            )
        written: list[str] = []
        files: list[dict[str, Any]] = []
        summary: list[str] = []
        for plan in plans:
            before_digest = plan.before_digest
            src_shown = ctx.workspace.display(plan.source)
            if plan.op.kind == "delete":
                ctx.store.drop_read_receipt(ctx.session_id, str(plan.source))
                remember(ctx, plan.source, plan.op_digest, before_digest, "before", "applied", self.name)
                remember(ctx, plan.source, plan.op_digest, ABSENT, "after", "applied", self.name)
                summary.append(f"D {_named(src_shown)}")
                files.append({"operation": "delete", "path": src_shown})
                continue
            assert plan.after is not None
            gen = record_read(ctx, plan.target, plan.after)
            after_digest = sha256_hex(plan.after)
            shown = ctx.workspace.display(plan.target)
            written.append(shown)
            remember(ctx, plan.source, plan.op_digest, before_digest, "before", "applied", self.name)
            if plan.dest is not None:
                ctx.store.drop_read_receipt(ctx.session_id, str(plan.source))
                remember(ctx, plan.source, plan.op_digest, ABSENT, "after", "applied", self.name)
                summary.append(f"R {_named(src_shown)} -> {_named(shown)}")
            else:
                remember(ctx, plan.source, plan.op_digest, after_digest, "after", "applied", self.name)
                verb = "A " if plan.before is None else ("M " if plan.op.kind == "update" else "W ")
                summary.append(verb + _named(shown))
            entry: dict[str, Any] = {
                "operation": "move" if plan.dest is not None else plan.op.kind,
                "path": shown,
                "sha256": after_digest,
                "bytes": len(plan.after),
                "readGeneration": gen,
            }
            entry.update(links_metadata(done.get(plan.target, safefs.Written())))
            if plan.dest is not None:
                entry["from"] = src_shown
                left = plan.source_stat.st_nlink - 1 if plan.source_stat is not None else 0
                if left > 0:  # a move is a new file: the source's other names keep its old content
                    entry["sourceOtherNames"] = left
                    summary[-1] += f" (the other {left} hard link(s) of {_named(src_shown)} keep its old content)"
            elif done.get(plan.target, safefs.Written()).in_place:
                summary[-1] += f" (in place: all {done[plan.target].links} hard links show it)"
            if plan.op.kind == "update":
                entry["chunks"] = len(plan.op.chunks)
                entry["matchedAtLines"] = plan.chunks_at
                entry["match"] = LEVEL_NAMES[plan.level]
            files.append(entry)
        return ToolOutput(
            text="Applied patch:\n" + "\n".join(summary),
            metadata={"writtenPaths": written, "files": files, "patchDigest": patch_digest},
        )


def safefs_present(where: safefs.Target) -> bool:
    try:
        return safefs.lstat(where) is not None
    except (OSError, Refused):
        return False


def _ambiguous(lines: list[str], cursor: int, first: int, second: int) -> str:
    """A chunk's context found at 0-based lines ``first`` and ``second``: the message, with the
    '@@' anchor that picks each (the nearest line above it that an anchor would find first)."""

    def anchor(at: int, after: int) -> str | None:
        for j in range(at - 1, after - 1, -1):
            text = lines[j].strip()
            if text and all(ln.strip() != text for ln in lines[cursor:j]):
                return text
        return None

    picks = [(a, n) for a, n in ((anchor(first, cursor), first), (anchor(second, first), second)) if a is not None]
    how = (
        "name the one meant with an '@@' anchor, the text of a line above it: "
        + ", ".join(f"'@@ {a}' for line {n + 1}" for a, n in picks)
        + "; or add more unique context"
        if picks
        else "add an '@@ <text of a line above it>' anchor or more unique context"
    )
    return (
        f"its context matches more than once (at lines {first + 1} and {second + 1}); {how} "
        "(an '@@' line is matched as text, not as a line number)"
    )


def given_path(ctx: ToolContext, raw: str) -> Path:
    """The path as the model named it, before symbolic links are resolved."""
    p = Path(os.path.expanduser(raw))
    return p if p.is_absolute() else ctx.workspace.root / p


def _from_shown_crs(chunks: list[Chunk], lines: list[str]) -> list[Chunk]:
    """The chunks with read's control pictures (a lone CR's ``textfile.CR_SHOWN``, an ESC's U+241B,
    ...) taken back as their controls, in each chunk whose context/removed lines or anchor hold
    them, for each picture the file holds none of itself (so that picture, copied from read, cannot
    mean itself there)."""
    old = "\n".join(t for c in chunks for t in [*c.old, c.title or ""])
    if not control_pictures.PICTURES.search(old):
        return chunks
    taken = textfile.taken_pictures(old, "\n".join(lines))
    if not taken:
        return chunks
    out = []
    for c in chunks:
        mine = taken & control_pictures.pictures_in("\n".join([*c.old, c.title or ""]))
        if mine:
            ops = [(kind, textfile.from_shown(text, mine)) for kind, text in c.ops]
            c = replace(c, ops=ops, title=None if c.title is None else textfile.from_shown(c.title, mine))
        out.append(c)
    return out


def _replay_chunk(
    ops: list[tuple[str, str]],
    start: int,
    lines: list[str],
    eols: list[str],
    out_lines: list[str],
    out_eols: list[str | None],
) -> None:
    """Append one placed chunk's result: context lines as the file has them, and each run of
    removed/added lines as its added lines, terminated by ``textfile.replaced_eols`` (a replaced
    line keeps its own terminator, a line with no old counterpart takes the style)."""
    i = start
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        out_lines.extend(added)
        out_eols.extend(textfile.replaced_eols(removed, len(added)))
        removed.clear()
        added.clear()

    for kind, text in ops:
        if kind == "ctx":
            flush()
            out_lines.append(lines[i])  # the file's own text, also when matched tolerantly
            out_eols.append(eols[i])
            i += 1
        elif kind == "del":
            removed.append(eols[i])
            i += 1
        else:
            added.append(text)
    flush()


def _encode_new(bom: bool, lines: list[str], eols: list[str]) -> bytes | None:
    try:
        return textfile.encode(bom, lines, eols)
    except UnicodeEncodeError:
        return None


def _named(shown: str) -> str:
    """A path in the summary: one line per file, so a name with a line break (or a quote, or edge
    whitespace) is the JSON string a header takes, never a second, made-up summary line."""
    return quote_path(shown, grep=False)


def _write_protected(shown: str) -> str:
    return f"{shown} is write-protected (this process may not write it); chmod u+w it first, or leave it as it is."


def _explain_add(c: Conflict) -> Conflict:
    return replace(
        c, detail=c.detail + " ('*** Add File' on an existing file replaces it whole, which needs a read of it)"
    )

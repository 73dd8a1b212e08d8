"""edit and delete: exact text replacement in one file, and removal of one whole file.

Both follow apply_patch's rules: the file must have a read receipt that still matches it
(ReadRequired / StaleRead), the same operation against the same content is an IdenticalReplay,
and edit's old text must match the current logical text exactly once unless ``replace_all``
(otherwise ContextMismatch). edit matches on logical lines: a CRLF file is matched with "\\n"
line breaks, keeps its BOM, its untouched line endings and its final-newline state; a replaced
line keeps its own terminator and an added line break takes the file's style (as apply_patch).
"""

from __future__ import annotations

import re
import stat

from pydantic import Field

from zuno import safefs
from zuno.declarations import BlockKind, Declarations
from zuno.receipts import (
    Conflict,
    changed_on_write,
    check_fresh,
    check_fresh_digest,
    read_call,
    record_read,
    sha256_hex,
)
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.file_scan import (
    digest_current,
    in_thread,
    links_metadata,
    links_note,
    normalization_twin,
    not_a_file,
    read_current,
    refuse_directory_name,
    twin_note,
)
from zuno.tools.patch import textfile
from zuno.tools.patch.applier import ABSENT, given_path, in_state_dir, remember, replay_conflict
from zuno.tools.patch.grammar import digest
from zuno.tools.patch.retry import NOT_UTF8_HINT, READ_ROWS_HINT, copies_undecodable, without_read_rows
from zuno.tools.search.collect import quote_path
from zuno.workspace import STATE_DIR

# old_string is looked for again with its whitespace loosened only up to this size.
LOOSE_MATCH_MAX_CHARS = 64 * 1024


def loose_match(text: str, old: str) -> int:
    """Where ``old`` occurs in ``text`` if every run of whitespace in it may be any other run
    (indentation, a doubled space, a tab): the commonest reason a model's old_string is not found.
    -1 when it does not, or when ``old`` is too long to look for that way."""
    words = old.split()
    if not words or len(old) > LOOSE_MATCH_MAX_CHARS:
        return -1
    m = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return m.start() if m else -1


class EditArgs(ToolArgs):
    path: str = Field(description="The file to change (it must have been read in this session).")
    old_string: str = Field(description="The exact text to replace, as read (line breaks as \\n).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


def _refuse_state(ctx: ToolContext, path, shown: str) -> None:
    if in_state_dir(ctx, path):
        raise Refused(
            BlockKind.denied, f"{shown} is inside Zuno's state folder {STATE_DIR}/, which tools do not write."
        )


class EditTool(Tool):
    name = "edit"
    description = (
        "Replace exact text in an existing file. old_string must match the current file exactly once "
        "(include surrounding lines to make it unique) unless replace_all is true. The file must have been read "
        "in this session in its current state. Line endings, BOM and final newline are kept."
    )
    Args = EditArgs
    declarations = Declarations()

    async def run(self, ctx: ToolContext, args: EditArgs) -> ToolOutput:
        refuse_directory_name(args.path, "path", "edit changes files only")
        path, where = ctx.locate(args.path)
        shown = ctx.workspace.display(path)
        _refuse_state(ctx, path, shown)
        old = args.old_string.replace("\r\n", "\n")
        new = args.new_string.replace("\r\n", "\n")
        if old == "":
            raise Refused(
                BlockKind.invalid_arguments,
                "argument 'old_string' is empty: give the exact text to replace (use write to create a file).",
            )
        if old == new:
            raise Refused(
                BlockKind.invalid_arguments, "arguments 'old_string' and 'new_string' are the same: no change."
            )
        if textfile.encode_text(new) is None:
            raise Refused(
                BlockKind.invalid_arguments, "argument 'new_string' holds a lone surrogate, which no byte can carry."
            )
        op_digest = digest({"kind": "edit", "path": str(path), "old": old, "new": new, "all": args.replace_all})
        async with ctx.workspace.mutation_lock:
            try:
                current, st = await in_thread(lambda _stop: read_current(where))
            except OSError as e:
                return ToolOutput.failure(not_a_file(shown, e, "edit changes files only"))
            if current is None or st is None:
                twin = await in_thread(lambda _stop: normalization_twin(where))
                if twin is not None:
                    return ToolOutput.failure(f"{shown}: no such file; {twin_note(shown, twin)}.")
                return ToolOutput.failure(
                    f"{shown}: no such file. edit changes an existing file; use write to create one."
                )
            cur_digest = sha256_hex(current)
            conflict = replay_conflict(ctx, path, op_digest, cur_digest) or check_fresh(ctx, path, current, op_digest)
            if conflict is not None:
                return conflict.to_output()
            kind = textfile.not_text(current)
            if kind is not None:
                return ToolOutput.failure(
                    f"{shown} is {kind}; edit changes UTF-8 text only, so nothing was written. "
                    "Replace it whole with write, or convert it with shell first."
                )
            tf = textfile.decode(current)
            logical = "".join(line + ("\n" if eol else "") for line, eol in zip(tf.lines, tf.eols, strict=True))
            terms = [e for e in tf.eols if e]
            given_old, given_new = args.old_string, args.new_string
            taken = textfile.taken_pictures(given_old, logical)
            if taken:
                # copied from read, which shows a lone CR, an ESC, ... as its control picture (for
                # each picture the file holds none of itself)
                copied = (old, new, given_old, given_new)
                old, new, given_old, given_new = (textfile.from_shown(t, taken) for t in copied)
            if _as_given(logical, old, given_old):
                old, new = given_old, given_new
            count = logical.count(old)
            if count == 0 or (count > 1 and not args.replace_all):
                detail = (
                    "old_string is not in the current file"
                    if count == 0
                    else f"old_string matches {count} times; include more surrounding text to make it unique, "
                    "or set replace_all"
                )
                remember(ctx, path, op_digest, cur_digest, "before", "ContextMismatch", self.name)
                at = logical.find(old) if count else loose_match(logical, old)
                near = logical.count("\n", 0, at) + 1 if at >= 0 else None
                if not count and near is not None:
                    detail += f"; text that differs from it only in whitespace starts at line {near}"
                bare = without_read_rows(old.split("\n")) if not count else None
                if bare is not None and "\n".join(bare) in logical:
                    detail += READ_ROWS_HINT.format(first=old.split("\t", 1)[0].strip())
                if not count and copies_undecodable([old], tf.lines):
                    detail += NOT_UTF8_HINT
                call = read_call(shown, near - 4 if near else None)
                return Conflict(
                    "ContextMismatch", shown, op_digest, cur_digest, detail=detail, suggested_call=call
                ).to_output()
            replaced = count if args.replace_all else 1
            out = logical.replace(old, new) if args.replace_all else logical.replace(old, new, 1)
            data = _relay(out, logical, old, new, terms, tf, args.replace_all)
            mode = stat.S_IMODE(st.st_mode)
            try:
                written = await in_thread(
                    lambda _stop: safefs.atomic_write(
                        where, data, mode, refuse_protected=True, keep_links=True, expect=cur_digest
                    )
                )
            except safefs.Changed as e:
                return changed_on_write(ctx, path, e.digest, op_digest).to_output()
            except OSError as e:
                try:
                    after, _ = await in_thread(lambda _stop: read_current(where))
                except OSError:
                    after = None
                if after == current:
                    return ToolOutput.failure(f"{shown}: the write failed ({e.strerror}); the file is unchanged.")
                return ToolOutput.uncertain(
                    f"{shown}: the write failed after it began ({e.strerror}). Read the file before any new mutation.",
                    observedChanged=[shown],
                    writtenPaths=[shown] if after is not None else [],
                )
            gen = record_read(ctx, path, data)
            after_digest = sha256_hex(data)
            remember(ctx, path, op_digest, cur_digest, "before", "applied", self.name)
            remember(ctx, path, op_digest, after_digest, "after", "applied", self.name)
        return ToolOutput(
            text=f"Edited {quote_path(shown, grep=False)}: {replaced} replacement(s).{links_note(written)}",
            metadata={
                "writtenPaths": [shown],
                "replacements": replaced,
                "sha256": after_digest,
                "bytes": len(data),
                "readGeneration": gen,
                **links_metadata(written),
            },
        )


def _as_given(logical: str, old: str, given: str) -> bool:
    """Whether old_string and new_string are to be taken as given, not with their CRLFs as LFs (how
    read shows line breaks): only the text as given is in the file. A line whose own text ends in CR
    (b"x\\r\\r\\n", read shows "x\\r") followed by its line break is "x\\r\\n" in the logical text."""
    return old != given and old not in logical and given in logical


def _relay(
    out: str, logical: str, old: str, new: str, terms: list[str], tf: textfile.TextFile, replace_all: bool
) -> bytes:
    """Put the file's own line terminators back on the edited logical text: a line break outside
    every replacement keeps its original terminator, one inside new text takes the terminator of
    the old line it replaces or, with none, the file's style (``_new_breaks``)."""
    new_terms: list[str] = []
    pos = 0
    k = 0  # index into terms (original "\n"s consumed)
    old_nl = old.count("\n")
    while True:
        at = logical.find(old, pos)
        if at < 0:
            break
        before = logical.count("\n", pos, at)
        new_terms.extend(terms[k : k + before])
        new_terms.extend(_new_breaks(terms[k + before : k + before + old_nl], old, new, tf.style))
        k += before + old_nl
        pos = at + len(old)
        if not replace_all:
            break
    new_terms.extend(terms[k:])
    parts = out.split("\n")
    body: list[str] = []
    for i, part in enumerate(parts):
        body.append(part)
        if i < len(parts) - 1:
            body.append(new_terms[i])
    return (textfile.BOM if tf.bom else b"") + "".join(body).encode("utf-8", "surrogateescape")


def _new_breaks(inside: list[str], old: str, new: str, style: str) -> list[str]:
    """Terminators for the line breaks of new text that replaces old text whose breaks had
    ``inside``, by apply_patch's rule (``textfile.replaced_eols``) on the lines the replacement
    touches: the line holding the replacement's end keeps the terminator outside it, so the new
    breaks pair with the old ones in order; when both texts end with a line break the line after
    is untouched, and the last new break takes the last old one."""
    n = new.count("\n")
    if old.endswith("\n") and new.endswith("\n"):
        paired = textfile.replaced_eols(inside, n)
    else:
        paired = textfile.replaced_eols([*inside, style], n + 1)[:-1]
    return [t or style for t in paired]


class DeleteArgs(ToolArgs):
    path: str = Field(description="The file to delete (it must have been read in this session).")


class DeleteTool(Tool):
    name = "delete"
    description = (
        "Delete one whole file. The file must have been read in this session in its current state; "
        "directories are not deleted."
    )
    Args = DeleteArgs
    declarations = Declarations()

    async def run(self, ctx: ToolContext, args: DeleteArgs) -> ToolOutput:
        refuse_directory_name(args.path, "path", "delete removes files only")
        path, where = ctx.locate(args.path)
        shown = ctx.workspace.display(path)
        _refuse_state(ctx, path, shown)
        if given_path(ctx, args.path).is_symlink():  # also when named by its absolute path
            return ToolOutput.failure(
                f"{args.path} is a symbolic link; delete removes regular files only (it would not remove the link)."
            )
        op_digest = digest({"kind": "delete", "path": str(path)})
        async with ctx.workspace.mutation_lock:
            try:
                current = await in_thread(lambda _stop: digest_current(where))
            except OSError as e:
                return ToolOutput.failure(not_a_file(shown, e, "delete removes files only; nothing was deleted"))
            if current is None:
                conflict = replay_conflict(ctx, path, op_digest, ABSENT)
                if conflict is not None:
                    return conflict.to_output()
                return ToolOutput.failure(f"{shown}: no such file; nothing was deleted.")
            cur_digest, size, _st = current
            conflict = check_fresh_digest(ctx, path, cur_digest, op_digest)
            if conflict is not None:
                return conflict.to_output()
            try:
                await in_thread(lambda _stop: safefs.unlink(where))
            except OSError as e:
                return ToolOutput.failure(f"{shown}: cannot be deleted ({e.strerror}); it is unchanged.")
            ctx.store.drop_read_receipt(ctx.session_id, str(path))
            remember(ctx, path, op_digest, cur_digest, "before", "applied", self.name)
            remember(ctx, path, op_digest, ABSENT, "after", "applied", self.name)
        return ToolOutput(
            text=f"Deleted {quote_path(shown, grep=False)} ({size} bytes).",
            metadata={
                "writtenPaths": [],
                "deletedPaths": [shown],
                "bytes": size,
                "sha256": cur_digest,
            },
        )


def register(registry: Registry) -> None:
    # edit: a registered slot in zuno, on the surface in chord. delete: chord.
    registry.add("edit", EditTool, profiles=("zuno", "chord"))
    registry.add("delete", DeleteTool, profiles=("chord",))

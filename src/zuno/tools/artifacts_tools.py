"""save_artifact and read_artifact (chord): session artifacts and immutable results.

save_artifact has two exclusive shapes:
  (a) ``filename`` + ``content`` (+ ``mode``: create | append | overwrite) writes a session
      artifact at ``.zuno/artifacts/<session>/<filename>`` (a session-relative path);
  (b) ``result_type`` + ``result`` (a JSON object) stores an immutable, content-addressed result
      at ``.zuno/artifacts/<session>/results/<sha256>.json`` and returns a ResultRef
      (``id``, ``result_type``, ``rel_path``, ``sha256``, ``size_bytes``).
read_artifact reads a session artifact (including results and withheld output) by
session-relative path, in bounded byte windows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from typing import Any, Literal

from pydantic import Field

from zuno import limits, safefs
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind, Declarations
from zuno.output import ARTIFACTS_DIR
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.file_scan import in_thread
from zuno.windows import Window, read_window_fd
from zuno.workspace import STATE_DIR

RESULTS_DIR = "results"
SESSION_ARTIFACT = "session-artifact"
RESULT_ARTIFACT = "result"
_RESULT_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")
_SEGMENT_BAD = re.compile(r'[\x00-\x1f\x7f<>:"|?*\\]')


_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def session_dir(ctx: ToolContext) -> safefs.Target:
    """The session's artifact folder, made (and later opened) without following a link."""
    if not _SESSION_ID.match(ctx.session_id) or ".." in ctx.session_id:
        raise Refused(
            BlockKind.unavailable,
            f"session id {ctx.session_id!r} cannot name an artifact folder; use letters, digits, '.', '_' or '-'.",
        )
    base = safefs.Target(ctx.workspace.root, (STATE_DIR, ARTIFACTS_DIR, ctx.session_id), "filename")
    safefs.mkdirs(base)
    ctx.workspace.ensure_state_dir()
    return base


def session_relative(raw: str, field: str) -> str:
    """Validate a session-relative path: relative, '/'-separated, no '.', '..' or empty segments."""
    if not raw or raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {raw!r} must be a path relative to the session's artifact folder, "
            "e.g. notes/plan.md.",
        )
    parts = raw.split("/")
    for seg in parts:
        if seg in ("", ".", "..") or _SEGMENT_BAD.search(seg) or seg[-1] in ". ":
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument '{field}': {raw!r} has an unsafe segment {seg!r}; use plain names separated by '/'.",
            )
    return "/".join(parts)


def _below(base: safefs.Target, rel: str, field: str) -> safefs.Target:
    return safefs.Target(base.root, (*base.parts, *rel.split("/")), field)


def _digest(where: safefs.Target) -> tuple[int, str]:
    """Size and SHA-256 of the whole file, streamed."""
    fd = safefs.open_regular(where)
    try:
        h = hashlib.sha256()
        size = 0
        while chunk := os.read(fd, limits.FILE_READ_CHUNK):
            h.update(chunk)
            size += len(chunk)
        return size, h.hexdigest()
    finally:
        os.close(fd)


class SaveArtifactArgs(ToolArgs):
    filename: str | None = Field(None, description="Shape (a): session-relative path of the artifact.")
    content: str | None = Field(None, description="Shape (a): the text to write.")
    mode: Literal["create", "append", "overwrite"] | None = Field(
        None, description="Shape (a): create (default; fails if it exists), append, or overwrite."
    )
    result_type: str | None = Field(None, description="Shape (b): the kind of result, e.g. review_findings.")
    result: dict[str, Any] | None = Field(None, description="Shape (b): the result, a JSON object.")


class SaveArtifactTool(Tool):
    name = "save_artifact"
    description = (
        "Save a session artifact or an immutable result. Two exclusive shapes: (a) filename + content "
        "(+ mode: create | append | overwrite) writes a session artifact (report, task graph, log); (b) result_type + "
        "result (a JSON object) stores an immutable, content-addressed result under artifacts/results/ and returns a "
        "ResultRef (id, result_type, rel_path, sha256, size_bytes) usable as complete's result_ref."
    )
    Args = SaveArtifactArgs
    declarations = Declarations()

    def subject(self, args: ToolArgs) -> str | None:
        return getattr(args, "filename", None) or getattr(args, "result_type", None)

    async def run(self, ctx: ToolContext, args: SaveArtifactArgs) -> ToolOutput:
        a = [k for k in ("filename", "content", "mode") if getattr(args, k) is not None]
        b = [k for k in ("result_type", "result") if getattr(args, k) is not None]
        if a and b:
            raise Refused(
                BlockKind.invalid_arguments,
                f"arguments {a} and {b} belong to the two exclusive shapes of save_artifact: give filename + content "
                "(+ mode), or result_type + result, not both.",
            )
        if b:
            if args.result_type is None or args.result is None:
                raise Refused(
                    BlockKind.invalid_arguments,
                    "shape (b) needs both 'result_type' (a name) and 'result' (a JSON object).",
                )
            return self._result(ctx, args.result_type, args.result)
        if args.filename is None or args.content is None:
            raise Refused(
                BlockKind.invalid_arguments,
                "give 'filename' + 'content' (+ 'mode') for a session artifact, or 'result_type' + 'result' "
                "for an immutable result.",
            )
        return await self._file(ctx, args.filename, args.content, args.mode or "create")

    async def _file(self, ctx: ToolContext, filename: str, content: str, mode: str) -> ToolOutput:
        rel = session_relative(filename, "filename")
        if rel.split("/")[0] == RESULTS_DIR:
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'filename': {RESULTS_DIR}/ holds immutable results; save those with result_type + result.",
            )
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(BlockKind.invalid_arguments, "argument 'content' holds a lone surrogate.") from None
        where = _below(session_dir(ctx), rel, "filename")
        target = where.path
        shown = ctx.workspace.display(target)
        async with ctx.workspace.mutation_lock:
            known = ctx.store.artifact(shown)
            if known is not None and known["kind"] != SESSION_ARTIFACT:
                raise Refused(
                    BlockKind.denied,
                    f"{rel} is an artifact the runtime saved ({known['kind']}); it is read-only. "
                    "Pick another filename.",
                )
            st = await in_thread(lambda _stop: safefs.lstat(where))
            exists = st is not None
            if st is not None and not stat.S_ISREG(st.st_mode):
                return ToolOutput.failure(f"{rel} exists and is {safefs.kind_of(st.st_mode)}; nothing was written.")
            if mode == "create" and exists:
                return ToolOutput.failure(
                    f"artifact {rel} already exists; nothing was written. Use mode 'append' or 'overwrite', "
                    "or another filename."
                )

            def save(_stop: object) -> tuple[int, str]:
                if mode == "append" and exists:
                    safefs.append(where, data)
                else:
                    safefs.atomic_write(where, data, None)
                return _digest(where)  # size and digest of the whole file

            try:
                total, digest = await in_thread(save)
            except NotADirectoryError as e:
                return ToolOutput.failure(f"{rel}: {e.filename} is a file, not a folder; nothing was written.")
            ctx.store.record_artifact(ctx.session_id, ctx.call_seq, shown, SESSION_ARTIFACT, total, digest)
        verb = {"create": "Created", "overwrite": "Wrote", "append": "Appended to"}[mode]
        return ToolOutput(
            text=f"{verb} artifact {rel} ({len(data)} bytes written; {total} bytes total).",
            metadata={
                "artifact": {"rel_path": rel, "path": shown, "size_bytes": total, "sha256": digest, "mode": mode},
                "outputPaths": [shown],
            },
        )

    def _result(self, ctx: ToolContext, result_type: str, result: dict[str, Any]) -> ToolOutput:
        if not _RESULT_TYPE.match(result_type):
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'result_type': {result_type!r} must start with a letter and use letters, digits, "
                "'_', '.', ':' or '-' (at most 64).",
            )
        doc = {"result_type": result_type, "result": result}
        try:
            data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError, UnicodeEncodeError) as e:
            raise Refused(BlockKind.invalid_arguments, f"argument 'result' is not storable JSON ({e}).") from None
        digest = hashlib.sha256(data).hexdigest()
        rel = f"{RESULTS_DIR}/{digest}.json"
        where = _below(session_dir(ctx), rel, "result")
        shown = ctx.workspace.display(where.path)
        st = safefs.lstat(where)
        existed = st is not None and stat.S_ISREG(st.st_mode) and _digest(where)[1] == digest
        if not existed:
            safefs.atomic_write(where, data, 0o444)
        ctx.store.record_artifact(ctx.session_id, ctx.call_seq, shown, RESULT_ARTIFACT, len(data), digest)
        ref = {
            "id": f"res_{digest[:24]}",
            "result_type": result_type,
            "rel_path": rel,
            "sha256": digest,
            "size_bytes": len(data),
        }
        return ToolOutput(
            text=f"Stored result {ref['id']} ({result_type}, {len(data)} bytes) at {rel}"
            + (" (identical content was already stored)." if existed else "."),
            metadata={"resultRef": ref, "path": shown, "outputPaths": [shown]},
        )


class ReadArtifactArgs(ToolArgs):
    path: str = Field(description="Session-relative artifact path, e.g. notes/plan.md or results/<sha256>.json.")
    cursor: int | None = Field(None, ge=0, description="Absolute byte offset to start at (default 0).")
    limit: int | None = Field(None, ge=1, description="Window size in bytes: default 16384, clamped to 51200.")


class ReadArtifactTool(Tool):
    name = "read_artifact"
    description = (
        "Read a session artifact by session-relative path (what save_artifact wrote, a stored result, or saved "
        "output), in byte windows: pass the returned cursor to continue."
    )
    Args = ReadArtifactArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: ReadArtifactArgs) -> ToolOutput:
        raw = args.path.removeprefix("./")
        # Tolerate the workspace-relative form a saved-output notice shows.
        raw = raw.removeprefix(f"{STATE_DIR}/{ARTIFACTS_DIR}/{ctx.session_id}/")
        rel = session_relative(raw, "path")
        base = session_dir(ctx)
        where = _below(base, rel, "path")
        target = where.path

        def window(_stop: object) -> Window:
            fd = safefs.open_regular(where)  # no link followed, no FIFO waited on
            try:
                return read_window_fd(fd, args.cursor, args.limit)
            finally:
                os.close(fd)

        try:
            w = await in_thread(window)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            names = sorted(str(p.relative_to(base.path)) for p in base.path.rglob("*") if p.is_file())[:20]
            return ToolOutput.failure(
                f"no session artifact {rel!r}."
                + (f" This session has: {', '.join(names)}." if names else " This session has no artifacts yet.")
            )
        except safefs.NotRegular as e:
            return ToolOutput.failure(f"artifact {rel} is {e.what}, not a file; nothing was read.")
        except OSError as e:
            return ToolOutput.failure(f"artifact {rel} cannot be read ({e.strerror}).")
        head = f"[artifact {rel}: bytes {w.window_from}-{w.cursor} of {w.total}]"
        tail = f"[more: continue with cursor={w.cursor}]" if w.has_more else ""
        return ToolOutput(
            text=w.data.decode("utf-8", "replace"),
            raw=w.data,
            head=head,
            tail=tail,
            bounded=True,
            metadata={"path": ctx.workspace.display(target), "rel_path": rel, **w.facts()},
        )


def register(registry: Registry) -> None:
    registry.add("save_artifact", SaveArtifactTool, profiles=("chord",))
    registry.add("read_artifact", ReadArtifactTool, profiles=("chord",))

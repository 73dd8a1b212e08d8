"""report_write: publish an immutable report under .zuno/reports/, also from read-only work.

The model names the report (a plain filename); the host picks the path, putting a digest of the
session and call identity into the filename, writes it exclusively (never over an existing
file), and returns the exact path, byte count and SHA-256. The receipt (reportArtifact) is kept
on the durable call record and in the artifacts table. Names unsafe on any supported platform
are refused, and so is a state folder reached through a symbolic link.
"""

from __future__ import annotations

import hashlib
import unicodedata

from pydantic import Field

from zuno import limits, safefs
from zuno.declarations import BlockKind, Declarations
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.file_scan import in_thread
from zuno.workspace import STATE_DIR

REPORTS_DIR = "reports"

_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"} | {
    f"{p}{n}" for p in ("COM", "LPT") for n in [*"123456789", "¹", "²", "³"]
}
_FORBIDDEN_CHARS = set('<>:"/\\|?*')


def name_problem(name: str) -> str | None:
    """Why a report name is unsafe on some supported platform, or None."""
    if name == "":
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} names a directory, not a file"
    if "/" in name or "\\" in name:
        return "it contains a path separator; give a plain filename such as audit.md"
    if ".." in name:
        return "it contains '..'"
    bad = sorted({c for c in name if ord(c) < 0x20 or ord(c) == 0x7F or 0x80 <= ord(c) <= 0x9F})
    if bad:
        return f"it contains control characters ({', '.join(repr(c) for c in bad)})"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        return "it contains a lone surrogate, which no filesystem can store"
    forbidden = sorted({c for c in name if c in _FORBIDDEN_CHARS})
    if forbidden:
        return f"it contains characters Windows forbids in filenames ({' '.join(forbidden)})"
    if name[-1] in ". ":
        return "it ends with a dot or a space, which Windows strips"
    if name[0] == " ":
        return "it starts with a space"
    stem = name.split(".", 1)[0].rstrip(" ").upper()
    if stem in _WINDOWS_RESERVED:
        return f"{stem} is a reserved device name on Windows"
    if len(name.encode("utf-8")) > limits.REPORT_NAME_MAX_BYTES:
        return f"it is longer than {limits.REPORT_NAME_MAX_BYTES} bytes"
    if unicodedata.normalize("NFC", name) != name:
        return "it is not in Unicode NFC form (macOS and Windows would name it differently)"
    return None


def report_filename(name: str, session_id: str, call_id: str, call_seq: int) -> str:
    ident = hashlib.sha256(f"{session_id}\0{call_id}\0{call_seq}".encode()).hexdigest()[:16]
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return f"{name}-{ident}"
    return f"{stem}-{ident}.{ext}"


class ReportWriteArgs(ToolArgs):
    name: str = Field(description="A plain filename, e.g. audit.md")
    content: str = Field(description="The whole report, UTF-8, at most 1 MiB")


class ReportWriteTool(Tool):
    name = "report_write"
    description = (
        "Publish an immutable report in .zuno/reports/ (also from read-only work); returns the host-chosen path, "
        "byte count and SHA-256. Each call is a new file; cite the path."
    )
    Args = ReportWriteArgs
    declarations = Declarations()  # SideEffecting, Never, Exclusive: publication is a side effect

    def subject(self, args: ToolArgs) -> str | None:
        return getattr(args, "name", None)

    async def run(self, ctx: ToolContext, args: ReportWriteArgs) -> ToolOutput:
        why = name_problem(args.name)
        if why is not None:
            raise Refused(BlockKind.invalid_arguments, f"argument 'name': {args.name!r} is refused: {why}.")
        try:
            data = args.content.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(
                BlockKind.invalid_arguments, "argument 'content' is not valid UTF-8 text (it holds a lone surrogate)."
            ) from None
        if len(data) > limits.REPORT_MAX_BYTES:
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'content' is {len(data)} bytes; a report holds at most {limits.REPORT_MAX_BYTES} bytes "
                "(1 MiB). Split it into several reports.",
            )
        filename = report_filename(args.name, ctx.session_id, ctx.call_id, ctx.call_seq)
        where = safefs.Target(ctx.workspace.root, (STATE_DIR, REPORTS_DIR, filename), "name")
        target = where.path
        try:
            # .zuno/reports/ is made and opened without following a link: a symlinked ancestor is refused.
            safefs.mkdirs(safefs.Target(where.root, where.parts[:-1], "name"))
        except NotADirectoryError:
            raise Refused(
                BlockKind.denied,
                f"{STATE_DIR}/{REPORTS_DIR} is not a directory; reports are published only into a real "
                f"{STATE_DIR}/{REPORTS_DIR}/ folder of the workspace.",
            ) from None
        ctx.workspace.ensure_state_dir()
        try:
            await in_thread(lambda _stop: safefs.create_exclusive(where, data, 0o644, make_parents=False))
        except FileExistsError:
            return ToolOutput.failure(
                f"{ctx.workspace.display(target)} already exists; a report is never overwritten. Nothing was written."
            )
        except OSError as e:
            return ToolOutput.uncertain(
                f"writing the report {ctx.workspace.display(target)} failed after it began ({e.strerror}); "
                "read it before publishing again.",
                writtenPaths=[ctx.workspace.display(target)],
            )
        shown = ctx.workspace.display(target)
        digest = hashlib.sha256(data).hexdigest()
        ctx.store.record_artifact(ctx.session_id, ctx.call_seq, shown, "report", len(data), digest)
        receipt = {"path": shown, "name": args.name, "bytes": len(data), "sha256": digest}
        return ToolOutput(
            text=f"Published report {shown} ({len(data)} bytes, sha256 {digest}).",
            metadata={"reportArtifact": receipt, "writtenPaths": [shown], "outputPaths": [shown]},
        )


def register(registry: Registry) -> None:
    registry.add("report_write", ReportWriteTool, profiles=("zuno",))

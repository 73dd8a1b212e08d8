"""read and write: the first tools, and the path every file tool follows.

read returns a file as numbered text in 1-based line pages, or a directory as a sorted listing,
and records a read receipt. write creates a file, or replaces a whole file the session has read
in its current state; otherwise it is a typed conflict and nothing is written.
"""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

from pydantic import Field

from zuno import limits
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind, Declarations
from zuno.fsutil import atomic_write
from zuno.receipts import check_fresh, record_read, sha256_hex
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.workspace import STATE_DIR


def _suggest(p: Path) -> str:
    parent = p.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    try:
        names = os.listdir(parent)
    except OSError:
        return ""
    close = difflib.get_close_matches(p.name, names, n=3, cutoff=0.5)
    return (" Did you mean: " + ", ".join(str(parent / c) for c in close) + "?") if close else ""


class ReadArgs(ToolArgs):
    path: str = Field(description="File or directory, relative to the workspace root or absolute.")
    offset: int | None = Field(None, ge=1, description="1-based line (or entry) to start at.")
    limit: int | None = Field(None, ge=1, description="How many lines (or entries) to return.")


class ReadTool(Tool):
    name = "read"
    description = (
        "Read a file as numbered lines (1-based offset/limit paging) or list a directory. "
        "Records a read receipt that later edits of the file require."
    )
    Args = ReadArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: ReadArgs) -> ToolOutput:
        path = ctx.workspace.resolve(args.path)
        shown = ctx.workspace.display(path)
        if not path.exists():
            return ToolOutput.failure(f"{shown}: no such file or directory.{_suggest(path)}")
        if path.is_dir():
            return self._list(ctx, path, shown, args)
        try:
            data = path.read_bytes()
        except OSError as e:
            return ToolOutput.failure(f"{shown}: cannot be read ({e.strerror}).")
        record_read(ctx, path, data)
        if b"\x00" in data[: limits.READ_BINARY_SNIFF_BYTES]:
            return ToolOutput.failure(
                f"{shown} is a binary file ({len(data)} bytes); read shows text only. "
                "Inspect it with a tool meant for its format."
            )
        if not data:
            return ToolOutput(text=f"({shown} is empty)", metadata={"path": shown, "lines": 0, "bytes": 0})
        lines = data.split(b"\n")
        if data.endswith(b"\n"):
            lines.pop()
        total = len(lines)
        start = args.offset or 1
        if start > total:
            return ToolOutput.failure(f"offset {start} is past the end of {shown} ({total} lines).")
        want = args.limit or limits.READ_DEFAULT_LIMIT_LINES
        budget = ctx.config.tool_output.max_bytes - 200
        out: list[str] = []
        used = 0
        end = start - 1
        width = len(str(min(total, start + want - 1)))
        for i in range(start - 1, min(total, start - 1 + want)):
            text = lines[i].decode("utf-8", "replace").rstrip("\r")
            row = f"{i + 1:>{width}}\t{text}"
            if out and used + len(row.encode()) + 1 > budget:
                break
            out.append(row)
            used += len(row.encode()) + 1
            end = i + 1
        if end < total:
            footer = f"(lines {start}-{end} of {total}; continue with offset={end + 1})"
        else:
            footer = f"(end of file: {total} lines)" if start > 1 or args.limit else ""
        body = "\n".join(out)
        return ToolOutput(
            text=body,
            tail=footer,
            metadata={
                "path": shown,
                "lines": total,
                "bytes": len(data),
                "from": start,
                "to": end,
                "sha256": sha256_hex(data),
            },
        )

    @staticmethod
    def _list(ctx: ToolContext, path: Path, shown: str, args: ReadArgs) -> ToolOutput:
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as e:
            return ToolOutput.failure(f"{shown}: the directory cannot be listed ({e.strerror}).")
        names = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            names.append(e.name + ("/" if is_dir else ""))
        start = args.offset or 1
        want = args.limit or limits.READ_DEFAULT_LIMIT_LINES
        page = names[start - 1 : start - 1 + want]
        footer = ""
        if start - 1 + want < len(names):
            footer = f"({len(page)} of {len(names)} entries; continue with offset={start + len(page)})"
        head = f"{shown}/ ({len(names)} entries)" if shown != "." else f"./ ({len(names)} entries)"
        return ToolOutput(text="\n".join(page), head=head, tail=footer, metadata={"path": shown, "entries": len(names)})


class WriteArgs(ToolArgs):
    path: str = Field(description="The file to create or replace whole.")
    content: str = Field(description="The complete new content of the file.")


class WriteTool(Tool):
    name = "write"
    description = (
        "Create a file, or intentionally replace a whole file. Replacing an existing file needs a read of "
        "its current content in this session (read receipt); otherwise nothing is written."
    )
    Args = WriteArgs
    declarations = Declarations()  # SideEffecting, Never, Exclusive

    async def run(self, ctx: ToolContext, args: WriteArgs) -> ToolOutput:
        path = ctx.workspace.resolve(args.path)
        shown = ctx.workspace.display(path)
        if path == ctx.workspace.state_dir or path.is_relative_to(ctx.workspace.state_dir):
            raise Refused(
                BlockKind.denied, f"{shown} is inside Zuno's state folder {STATE_DIR}/, which tools do not write."
            )
        data = args.content.encode("utf-8", "surrogatepass")
        op_digest = sha256_hex(b"write\0" + str(path).encode() + b"\0" + data)
        async with ctx.workspace.mutation_lock:
            existed = path.exists()
            if existed and not path.is_file():
                return ToolOutput.failure(f"{shown} exists and is not a regular file; write replaces files only.")
            mode = None
            if existed:
                current = path.read_bytes()
                conflict = check_fresh(ctx, path, current, op_digest)
                if conflict is not None:
                    return conflict.to_output()
                mode = stat.S_IMODE(path.stat().st_mode)
            atomic_write(path, data, mode)
            generation = record_read(ctx, path, data)
        verb = "Replaced" if existed else "Created"
        return ToolOutput(
            text=f"{verb} {shown} ({len(data)} bytes).",
            metadata={
                "writtenPaths": [shown],
                "bytes": len(data),
                "sha256": sha256_hex(data),
                "created": not existed,
                "readGeneration": generation,
            },
        )


def register(registry: Registry) -> None:
    registry.add("read", ReadTool)
    registry.add("write", WriteTool)

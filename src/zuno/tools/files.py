"""read and write: the first tools, and the path every file tool follows.

read returns a file as numbered text in 1-based line pages, or a directory as a sorted listing,
and records a read receipt. write creates a file, or replaces a whole file the session has read
in its current state; otherwise it is a typed conflict and nothing is written.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from zuno import limits, safefs
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind, Declarations
from zuno.receipts import changed_on_write, check_fresh_digest, record_read, record_seen, sha256_hex
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools import control_pictures
from zuno.tools.file_scan import (
    Scan,
    digest_current,
    image_format,
    in_thread,
    links_metadata,
    links_note,
    normalization_twin,
    not_a_file,
    refuse_directory_name,
    scan_window,
    twin_note,
)
from zuno.tools.patch import textfile
from zuno.tools.search.collect import quote_path
from zuno.workspace import STATE_DIR

if TYPE_CHECKING:
    from zuno.config import Config


def _suggest(p: Path, display: Callable[[Path], str]) -> str:
    """Names close to ``p``'s in its nearest existing parent, shown as the workspace shows paths;
    a name that is not valid UTF-8 is not offered (no argument can name it)."""
    parent = p.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    try:
        names = [n for n in os.listdir(parent) if _nameable(n)]
    except OSError:
        return ""
    close = difflib.get_close_matches(p.name, names, n=3, cutoff=0.5)
    return (" Did you mean: " + ", ".join(json.dumps(display(parent / c)) for c in close) + "?") if close else ""


def _nameable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class ReadArgs(ToolArgs):
    path: str
    offset: int | None = Field(None, ge=1, description="1-based first line (or entry)")
    limit: int | None = Field(None, ge=1, description="Lines (or entries)")


class ReadTool(Tool):
    starts_in_step_task = True  # nothing entered before its first wait (an in_thread)
    name = "read"
    description = "Read a file as numbered lines, or list a directory; records the read receipt edits need."
    Args = ReadArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: ReadArgs) -> ToolOutput:
        path, where = ctx.locate(args.path)
        shown = ctx.workspace.display(path)
        start = args.offset or 1
        # A page never crosses the output limits (it would be withheld whole): at most max_lines
        # rows, in max_bytes; the footer names the next offset.
        want = min(args.limit or limits.READ_DEFAULT_LIMIT_LINES, ctx.config.tool_output.max_lines)
        budget = ctx.config.tool_output.max_bytes - 200
        # One line longer than the page can hold (a minified bundle) is cut to what fits, with a note,
        # rather than withheld whole with the page it is on.
        hold = min(limits.READ_LINE_HOLD_BYTES, max(1024, budget - 512))

        def work(stop: threading.Event) -> tuple[str, Any]:
            st = safefs.lstat(where)
            if st is None:
                return "missing", None
            if stat.S_ISDIR(st.st_mode):
                return "dir", safefs.listdir(where)
            fd = safefs.open_regular(where)  # no link followed, no FIFO waited on; the descriptor is checked
            try:
                return "file", (scan_window(fd, start, want, budget, stop, hold=hold), os.fstat(fd))
            finally:
                os.close(fd)

        def small_inline() -> tuple[str, Any] | None:
            """A small regular file is scanned on the loop (a few syscalls, no thread hop); anything
            else — missing, a directory, a large file — goes to the worker thread."""
            try:
                fd = safefs.open_regular(where)
            except OSError:  # missing, a directory, a FIFO...: the thread path says which
                return None
            try:
                fst = os.fstat(fd)
                if fst.st_size > limits.READ_INLINE_MAX_BYTES:
                    return None
                return "file", (scan_window(fd, start, want, budget, _NEVER, hold=hold), fst)
            finally:
                os.close(fd)

        try:
            found = small_inline()
            kind, value = found if found is not None else await in_thread(work)
        except FileNotFoundError:
            kind, value = "missing", None
        except safefs.NotRegular as e:
            return ToolOutput.failure(
                f"{shown} is {e.what}, not a regular file; read shows regular files and lists directories only. "
                "Nothing was read."
            )
        except IsADirectoryError:
            return ToolOutput.failure(f"{shown} became a directory while it was read; read it again to list it.")
        except OSError as e:
            return ToolOutput.failure(f"{shown}: cannot be read ({e.strerror}).")
        if kind == "missing":
            return ToolOutput.failure(f"{shown}: no such file or directory.{_suggest(path, ctx.workspace.display)}")
        if kind == "dir":
            return self._list(value, shown, args, ctx.config.tool_output.max_lines, budget)
        scan, st = value
        record_seen(ctx, path, scan.sha256, scan.size, st)
        if b"\x00" in scan.head:
            return ToolOutput.failure(_binary_message(ctx, shown, scan))
        if not scan.size:
            return ToolOutput(text=f"({shown} is empty)", metadata={"path": shown, "lines": 0, "bytes": 0})
        total = scan.lines
        if start > total:
            lines = "1 line" if total == 1 else f"{total} lines"
            return ToolOutput.failure(f"offset {start} is past the end of {shown} ({lines}).")
        width = len(str(min(total, start + want - 1)))
        out = []
        bom = scan.head.startswith(_UTF8_BOM)
        for row in scan.rows:
            text = row.text
            if bom and row.number == 1:
                # The byte-order mark is not text: shown, it is copied into old_string or patch
                # context, which edit and apply_patch match without it (and keep it on write).
                text = text.removeprefix("\ufeff")
            if row.cut:
                text += (
                    f" [... line {row.number} is {row.length} bytes; read holds its first "
                    f"{row.kept}. Read the rest with grep or shell.]"
                )
            out.append(f"{row.number:>{width}}\t{text}")
        body = "\n".join(out)
        notes: list[str] = []
        if scan.controls and control_pictures.CONTROLS.search(body):  # a lone CR, an ESC, ...: shown as pictures
            body, notes = _shown_controls(body, scan)
        end = scan.rows[-1].number if scan.rows else start - 1
        if end < total:
            footer = f"(lines {start}-{end} of {total}; continue with offset={end + 1})"
        else:
            footer = f"(end of file: {total} lines)" if start > 1 or args.limit else ""
        if bom and start == 1:
            note = "(the file starts with a UTF-8 byte-order mark, not shown; edit and apply_patch keep it)"
            footer = f"{footer}\n{note}" if footer else note
        for note in notes:
            footer = f"{footer}\n{note}" if footer else note
        return ToolOutput(
            text=body,
            tail=footer,
            metadata={
                "path": shown,
                "lines": total,
                "bytes": scan.size,
                "from": start,
                "to": end,
                "sha256": scan.sha256,
                **({"bom": True} if bom else {}),
            },
        )

    @staticmethod
    def _list(entries: list[tuple[str, bool]], shown: str, args: ReadArgs, max_lines: int, budget: int) -> ToolOutput:
        # One entry per line, under a name a call can take: a name with a newline (or a quote, or
        # leading/trailing whitespace) is a JSON string, as glob prints it; one that is not UTF-8
        # names nothing and is counted in a note instead.
        names = [quote_path(name + ("/" if is_dir else ""), grep=False) for name, is_dir in entries if _nameable(name)]
        unnameable = len(entries) - len(names)
        start = args.offset or 1
        if start > max(len(names), 1):
            return ToolOutput.failure(
                f"offset {start} is past the end of {shown}/ "
                f"({'1 entry' if len(names) == 1 else f'{len(names)} entries'}). Give an offset from 1 to "
                f"{max(len(names), 1)}."
            )
        want = min(args.limit or limits.READ_DEFAULT_LIMIT_LINES, max_lines)
        page = names[start - 1 : start - 1 + want]
        used = 0
        for i, name in enumerate(page):  # long names: the page ends before the output limits, too
            used += len(name.encode("utf-8", "surrogateescape")) + 1
            if used > budget and i:
                page = page[:i]
                break
        footer = ""
        if start - 1 + len(page) < len(names):
            footer = f"({len(page)} of {len(names)} entries; continue with offset={start + len(page)})"
        if unnameable:
            note = (
                f"({unnameable} more entr{'y' if unnameable == 1 else 'ies'} not shown: the name is not valid UTF-8, "
                "so no argument can name it; rename it with shell to reach it)"
            )
            footer = f"{footer}\n{note}" if footer else note
        head = f"{shown}/ ({len(names)} entries)" if shown != "." else f"./ ({len(names)} entries)"
        meta: dict[str, Any] = {"path": shown, "entries": len(names)}
        if unnameable:
            meta["unnameable"] = unnameable
        return ToolOutput(text="\n".join(page), head=head, tail=footer, metadata=meta)


_UTF8_BOM = b"\xef\xbb\xbf"


def _shown_controls(body: str, scan: Scan) -> tuple[str, list[str]]:
    """The rows' text with their controls shown as pictures (each but those whose picture the file
    holds itself), and the footer lines that say so: the lone CR's as before, one for the others."""
    crs: list[int] = []  # rows holding a lone CR
    others: list[int] = []  # rows holding another control
    held: set[str] = set()
    for row in scan.rows:
        found = set(control_pictures.CONTROLS.findall(row.text))
        if "\r" in found:
            crs.append(row.number)
            found.discard("\r")
        if found:
            others.append(row.number)
            held |= found
    notes = [_lone_cr_note(crs, scan.cr_symbol)] if crs else []
    if others:
        notes.append(_controls_note(others, held, scan.pictures))
    return control_pictures.to_shown(body, scan.pictures), notes


def _controls_note(rows: list[int], controls: set[str], pictures: set[str]) -> str:
    """The footer line for rows holding C0 controls other than TAB, LF and a lone CR (an ESC
    sequence, a backspace, a form feed): sent raw, they act on a terminal or log showing them."""
    where = f"line {rows[0]} holds" if len(rows) == 1 else f"{len(rows)} lines (first: {rows[0]}) hold"
    shown = sorted(c for c in controls if control_pictures.PICTURE[c] not in pictures)
    raw = sorted(c for c in controls if control_pictures.PICTURE[c] in pictures)
    parts = []
    if shown:
        listed = ", ".join(f"{control_pictures.name(c)} as {control_pictures.PICTURE[c]}" for c in shown)
        parts.append(
            f"shown as Unicode control pictures: {listed}; edit and apply_patch take such a picture in old "
            "text for its control"
        )
    if raw:
        listed = ", ".join(control_pictures.name(c) for c in raw)
        signs = ", ".join(f"{control_pictures.PICTURE[c]} (U+{ord(control_pictures.PICTURE[c]):04X})" for c in raw)
        parts.append(
            f"sent as the raw character{'s' if len(raw) > 1 else ''}: {listed}, as this file also holds {signs} "
            "itself, so that picture cannot stand for it"
        )
    return f"({where} control characters, " + "; ".join(parts) + ")"


def _lone_cr_note(rows: list[int], cr_symbol: bool) -> str:
    """The footer line for rows holding a lone CR (a carriage return that is not part of a CRLF:
    text inside the line). Sent raw, a terminal or log showing the row would overwrite it."""
    where = f"line {rows[0]} holds" if len(rows) == 1 else f"{len(rows)} lines (first: {rows[0]}) hold"
    if cr_symbol:
        return (
            f"({where} a lone carriage return (CR), sent as the raw character: this file also "
            f"holds {textfile.CR_SHOWN} (U+240D) itself, so that sign cannot stand for it)"
        )
    return (
        f"({where} a lone carriage return (CR, text inside the line, not a line break), shown as "
        f"{textfile.CR_SHOWN}; edit and apply_patch take {textfile.CR_SHOWN} in old text for the CR)"
    )
_NEVER = threading.Event()  # the stop signal of an inline scan, which nothing cancels midway


def image_tool_on_surface(config: Config) -> bool:
    """Whether view_image is on this configuration's surface (chord's default, unless switched off)."""
    if config.profile != "chord" or config.tools.get("view_image") is False:
        return False
    return config.agent.tools is None or "view_image" in config.agent.tools


def _binary_message(ctx: ToolContext, shown: str, scan: Scan) -> str:
    fmt = image_format(scan.head)
    wide = textfile.wide_encoding(scan.head)
    if fmt is None and wide is not None:
        return (
            f"{shown} is {wide} text (it starts with a {wide[:6]} byte-order mark, {scan.size} bytes), not UTF-8; "
            "read, edit and apply_patch handle UTF-8 text only"
            + ("; grep decodes it when it searches" if wide.startswith("UTF-16") else "")
            + f". To see it, run shell `iconv -f {wide[:6]} -t UTF-8 {shlex.quote(shown)}`."
        )
    if fmt is None:
        return (
            f"{shown} is a binary file ({scan.size} bytes); read shows text only. "
            "Inspect it with a tool meant for its format."
        )
    if image_tool_on_surface(ctx.config):
        return (
            f"{shown} is an image ({fmt}, {scan.size} bytes), a binary file; read shows text only. "
            f'Look at it with view_image {{"path": {json.dumps(shown)}}}.'
        )
    return (
        f"{shown} is an image ({fmt}, {scan.size} bytes), a binary file; read shows text only, and no image "
        "viewer is on this tool surface."
    )


class WriteArgs(ToolArgs):
    path: str
    content: str = Field(description="The whole new content")


class WriteTool(Tool):
    starts_in_step_task = True  # nothing entered before its first wait (an in_thread)
    name = "write"
    description = (
        "Create a file, or intentionally replace one whole: replacing needs a read of its current content in "
        "this session, else nothing is written."
    )
    Args = WriteArgs
    declarations = Declarations()  # SideEffecting, Never, Exclusive

    async def run(self, ctx: ToolContext, args: WriteArgs) -> ToolOutput:
        refuse_directory_name(args.path, "path", "write creates or replaces files only")
        path, where = ctx.locate(args.path)
        shown = ctx.workspace.display(path)
        if path == ctx.workspace.state_dir or path.is_relative_to(ctx.workspace.state_dir):
            raise Refused(
                BlockKind.denied, f"{shown} is inside Zuno's state folder {STATE_DIR}/, which tools do not write."
            )
        data = args.content.encode("utf-8", "surrogatepass")
        op_digest = sha256_hex(b"write\0" + str(path).encode() + b"\0" + data)
        async with ctx.workspace.mutation_lock:
            try:
                current = await in_thread(lambda _stop: digest_current(where))
            except OSError as e:
                return ToolOutput.failure(not_a_file(shown, e, "write creates or replaces files only"))
            existed = current is not None
            mode = None
            expect = safefs.MISSING
            if current is not None:
                cur_digest, _size, st = current
                conflict = check_fresh_digest(ctx, path, cur_digest, op_digest)
                if conflict is not None:
                    return conflict.to_output()
                mode = stat.S_IMODE(st.st_mode)
                expect = cur_digest
            try:
                written = await in_thread(
                    lambda _stop: safefs.atomic_write(
                        where, data, mode, refuse_protected=True, keep_links=True, expect=expect
                    )
                )
            except safefs.Changed as e:
                return changed_on_write(ctx, path, e.digest, op_digest).to_output()
            except OSError as e:
                return ToolOutput.failure(not_a_file(shown, e, "nothing was written"))
            generation = record_read(ctx, path, data)
            twin = None if existed else await in_thread(lambda _stop: normalization_twin(where))
        verb = "Replaced" if existed else "Created"
        note = f" Note: {twin_note(shown, twin)}; this is a second file beside it." if twin is not None else ""
        return ToolOutput(
            text=f"{verb} {quote_path(shown, grep=False)} ({len(data)} bytes).{note}{links_note(written)}",
            metadata={
                "writtenPaths": [shown],
                "bytes": len(data),
                "sha256": sha256_hex(data),
                "created": not existed,
                "readGeneration": generation,
                **links_metadata(written),
            },
        )


def register(registry: Registry) -> None:
    registry.add("read", ReadTool)
    registry.add("write", WriteTool)

"""The apply_patch grammar: Codex-style patches, parsed into file operations.

    *** Begin Patch
    *** Add File: <path>          then lines "+text" (the new file's lines)
    *** Delete File: <path>
    *** Update File: <path>
    *** Move to: <path>           optional, right after Update File
    @@ <title>                    a chunk; the title is an optional anchor line ("@@" alone: none)
     context / -removed / +added  lines of the chunk (an empty line is an empty context line)
    *** End of File               optional, ends a chunk that must match at the end of the file
    *** End Patch

Tolerated where it is safe: markers padded with whitespace, CRLF patch text, blank lines
before/after the patch and between chunks, a markdown fence around the whole patch (a first line
of three backticks, optionally with a language, and a last line of three backticks), a heredoc
wrapper (``<<'EOF'`` ... ``EOF``, also with a leading ``apply_patch``), a first chunk without
``@@``, unified-diff ranges (``@@ -3,7 +3,8 @@ title``) whose numbers are ignored, and a path
written as a JSON string, as read and glob show a name with a line break, a quote or whitespace
at either end (``*** Update File: "a\\nb.txt"``). Anything
else is a ``PatchSyntaxError`` naming the line (1-based, in the text as given) and what was
expected. The parser never raises anything else, whatever text it is given.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File:"
DELETE = "*** Delete File:"
UPDATE = "*** Update File:"
MOVE = "*** Move to:"
EOF_MARK = "*** End of File"

_HEREDOC_OPEN = re.compile(r"^\s*(?:apply_patch\s+)?<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1\s*$")
_FENCE_OPEN = re.compile(r"^\s*```[A-Za-z0-9_+-]*\s*$")
_UNIFIED_RANGE = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")

# The first line of a unified diff (git diff, diff -u), which models send instead of a patch.
_UNIFIED_DIFF = re.compile(r"^(?:diff --git |--- \S|\+\+\+ \S|Index: )")
UNIFIED_DIFF_HINT = (
    f"this is a unified diff, not an apply_patch patch. Send '{BEGIN}', then per file '*** Update File: <path>' "
    "and '@@' chunks of ' ' (context), '-' and '+' lines (no '---'/'+++' headers, no line numbers needed), then "
    f"'{END}'; or apply the diff with shell (git apply)"
)
EXPECTED_HEADERS = "'*** Add File: <path>', '*** Delete File: <path>', '*** Update File: <path>' or '*** End Patch'"


class PatchSyntaxError(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass(slots=True)
class Chunk:
    number: int  # 1-based across the whole patch
    line: int  # patch line where the chunk starts
    title: str | None
    # ("ctx" | "del" | "add", text) in patch order
    ops: list[tuple[Literal["ctx", "del", "add"], str]] = field(default_factory=list)
    end_of_file: bool = False

    @property
    def old(self) -> list[str]:
        return [t for k, t in self.ops if k != "add"]

    @property
    def new(self) -> list[str]:
        return [t for k, t in self.ops if k != "del"]

    def canonical(self) -> dict[str, Any]:
        return {"title": self.title, "ops": [[k, t] for k, t in self.ops], "eof": self.end_of_file}


@dataclass(slots=True)
class FileOp:
    kind: Literal["add", "delete", "update"]
    path: str
    line: int
    move_to: str | None = None
    add_lines: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)

    def canonical(self, path: str, move_to: str | None) -> dict[str, Any]:
        """The operation as data, with resolved paths: what its digest covers."""
        out: dict[str, Any] = {"kind": self.kind, "path": path}
        if self.kind == "add":
            out["lines"] = self.add_lines
        if self.kind == "update":
            out["moveTo"] = move_to
            out["chunks"] = [c.canonical() for c in self.chunks]
        return out


def digest(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _marker_arg(stripped: str, marker: str) -> str | None:
    if stripped.startswith(marker):
        return unquote_path(stripped[len(marker) :].strip())
    return None


def unquote_path(arg: str) -> str:
    """A header path written as a JSON string ("a\\nb.txt", " spaced ") is the name it spells:
    read and glob print exactly the names a bare header cannot hold (a line break, a quote,
    whitespace at either end) that way, so a name copied from a listing reaches its file.
    Anything else is the path as written."""
    if len(arg) >= 2 and arg[0] == arg[-1] == '"':
        try:
            name = json.loads(arg)
        except ValueError:
            return arg
        if isinstance(name, str) and name and "\x00" not in name:
            return name
    return arg


def _is_chunk_header(line: str) -> bool:
    s = line.strip()
    return s == "@@" or s.startswith("@@ ")


def _chunk_title(line: str) -> str | None:
    s = line.strip()
    if s == "@@":
        return None
    rest = s[3:]
    m = _UNIFIED_RANGE.match(rest)
    if m:
        rest = m.group(1)
    rest = rest.strip()
    return rest or None


_MARKERS = (ADD, DELETE, UPDATE, MOVE, EOF_MARK, BEGIN, END)


_FILE_HEADER = re.compile(r"^[ \t]*\*\*\* (?:Add|Delete|Update) File:[ \t]*(\S.*?)[ \t\r]*$", re.MULTILINE)


def first_path(text: str) -> str | None:
    """The first file a patch names, cheaply (for permission subjects); None if none."""
    m = _FILE_HEADER.search(text) if isinstance(text, str) else None
    return unquote_path(m.group(1)) if m else None


def _is_marker(line: str) -> bool:
    s = line.strip()
    return s.startswith("*** ") and s.startswith(_MARKERS)


def _trim_blank(lines: list[str], numbers: list[int]) -> None:
    """Drop blank lines at both ends, keeping each line's 1-based number beside it."""
    while lines and not lines[-1].strip():
        lines.pop()
        numbers.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
        numbers.pop(0)


def parse(text: str) -> list[FileOp]:
    """Parse patch text into file operations; PatchSyntaxError on anything else."""
    if not isinstance(text, str):
        raise PatchSyntaxError(1, "the patch must be text")
    raw = text.split("\n")
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in raw]
    numbers = list(range(1, len(lines) + 1))
    _trim_blank(lines, numbers)  # blank lines around the patch
    if not lines:
        raise PatchSyntaxError(1, f"the patch is empty: expected '{BEGIN}' on the first line")
    # A markdown fence around the whole patch (```, ```diff, ```patch ... ```): what chat models
    # often send. Only a whole-patch fence is taken off; nothing inside is touched.
    if len(lines) >= 2 and _FENCE_OPEN.match(lines[0]) and lines[-1].strip() == "```":
        fence_no = numbers[0]
        lines, numbers = lines[1:-1], numbers[1:-1]
        _trim_blank(lines, numbers)
        if not lines:
            raise PatchSyntaxError(fence_no + 1, f"the markdown fence holds no patch: expected '{BEGIN}'")
    # A heredoc wrapper: <<'EOF' ... EOF.
    m = _HEREDOC_OPEN.match(lines[0])
    if m and len(lines) >= 2 and lines[-1].strip() == m.group(2):
        open_no = numbers[0]
        lines, numbers = lines[1:-1], numbers[1:-1]
        _trim_blank(lines, numbers)
        if not lines:
            raise PatchSyntaxError(open_no + 1, f"the heredoc holds no patch: expected '{BEGIN}'")
    if lines[0].strip() != BEGIN:
        hint = ""
        if lines[0].strip().startswith((ADD, DELETE, UPDATE)):
            hint = f": a patch wraps its file operations in '{BEGIN}' ... '{END}'; put '{BEGIN}' before this line"
        elif _UNIFIED_DIFF.match(lines[0]):
            hint = f": {UNIFIED_DIFF_HINT}"
        raise PatchSyntaxError(numbers[0], f"expected '{BEGIN}', got {_show(lines[0])}{hint}")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise PatchSyntaxError(
            numbers[-1] if len(lines) >= 2 else numbers[0] + 1,
            f"expected '{END}' as the last line"
            + (f", got {_show(lines[-1])}" if len(lines) >= 2 else ", but the patch ends after its first line")
            + f". If the patch was cut short, send it whole; it ends with '{END}'",
        )
    body = lines[1:-1]
    nums = numbers[1:-1]
    ops: list[FileOp] = []
    i = 0
    chunk_no = 0
    while i < len(body):
        line, no = body[i], nums[i]
        s = line.strip()
        if not s:
            i += 1
            continue
        if (p := _marker_arg(s, ADD)) is not None:
            _need_path(p, no, ADD)
            op = FileOp("add", p, no)
            i += 1
            while i < len(body) and body[i].startswith("+"):
                op.add_lines.append(body[i][1:])
                i += 1
            k = i
            while k < len(body) and not body[k].strip():
                k += 1
            if k < len(body) and not _is_marker(body[k]):
                # Not the next operation: the new file's lines went on without their '+'.
                raise PatchSyntaxError(
                    nums[i],
                    f"'{ADD} {p}': every line of the new file starts with '+' (an empty line is a lone '+'), "
                    f"got {_show(body[i])}",
                )
            ops.append(op)
            continue
        if (p := _marker_arg(s, DELETE)) is not None:
            _need_path(p, no, DELETE)
            ops.append(FileOp("delete", p, no))
            i += 1
            continue
        if (p := _marker_arg(s, UPDATE)) is not None:
            _need_path(p, no, UPDATE)
            op = FileOp("update", p, no)
            i += 1
            if i < len(body) and (mv := _marker_arg(body[i].strip(), MOVE)) is not None:
                _need_path(mv, nums[i], MOVE)
                op.move_to = mv
                i += 1
            i, chunk_no = _parse_chunks(body, nums, i, op, chunk_no)
            if not op.chunks and op.move_to is None:
                raise PatchSyntaxError(
                    no, f"'{UPDATE} {p}' has no chunk: expected '@@' and lines starting with ' ', '-' or '+'"
                )
            ops.append(op)
            continue
        if s.startswith(MOVE):
            raise PatchSyntaxError(no, f"'{MOVE}' must follow an '{UPDATE} <path>' line directly")
        hint = f": {UNIFIED_DIFF_HINT}" if _UNIFIED_DIFF.match(line) else ""
        raise PatchSyntaxError(no, f"expected {EXPECTED_HEADERS}, got {_show(line)}{hint}")
    if not ops:
        raise PatchSyntaxError(nums[0] if nums else numbers[-1], "the patch has no file operation: nothing to apply")
    return ops


def _parse_chunks(body: list[str], nums: list[int], i: int, op: FileOp, chunk_no: int) -> tuple[int, int]:
    first = True
    while i < len(body):
        line, no = body[i], nums[i]
        if _is_marker(line) and line.strip() != EOF_MARK:
            break  # the next file operation (or a stray marker the caller names)
        if not line.strip() and not _is_chunk_header(line):
            # Blank lines between chunks separate them; inside a chunk an empty line is context.
            i += 1
            continue
        if _is_chunk_header(line):
            title = _chunk_title(line)
            start = i + 1
        elif first and line[:1] in (" ", "+", "-"):
            title = None
            start = i
        else:
            raise PatchSyntaxError(
                no,
                f"expected '@@' (a chunk header) in '{UPDATE} {op.path}', got {_show(line)}",
            )
        first = False
        chunk_no += 1
        chunk = Chunk(chunk_no, no, title)
        j = start
        while j < len(body):
            ln = body[j]
            if ln.strip() == EOF_MARK:
                if not chunk.ops:
                    raise PatchSyntaxError(nums[j], f"'{EOF_MARK}' ends a chunk that has no lines")
                chunk.end_of_file = True
                j += 1
                break
            c = ln[:1]
            if c == "+":
                chunk.ops.append(("add", ln[1:]))
                j += 1
                continue
            if c == "-":
                chunk.ops.append(("del", ln[1:]))
                j += 1
                continue
            if _is_chunk_header(ln) or _is_marker(ln):
                break
            if c == "" or c == " ":
                chunk.ops.append(("ctx", ln[1:]))
            elif c == "-":
                chunk.ops.append(("del", ln[1:]))
            elif c == "+":
                chunk.ops.append(("add", ln[1:]))
            elif ln.startswith("\\ "):
                raise PatchSyntaxError(
                    nums[j],
                    f"{_show(ln)} is unified-diff syntax, not apply_patch's: drop the line (apply_patch keeps the "
                    f"file's final-newline state; a chunk that must match at the end of the file ends with "
                    f"'{EOF_MARK}')",
                )
            else:
                raise PatchSyntaxError(
                    nums[j],
                    "expected a chunk line starting with ' ' (context), '-' (removed) or '+' (added), "
                    f"'@@' or a '*** ' marker, got {_show(ln)}",
                )
            j += 1
        # Empty lines at the end of a chunk are separators, not context.
        while chunk.ops and j > start and body[j - 1] == "" and chunk.ops[-1] == ("ctx", ""):
            chunk.ops.pop()
            j -= 1
        if not chunk.ops:
            raise PatchSyntaxError(no, "a chunk has no lines: expected lines starting with ' ', '-' or '+' after '@@'")
        if not any(k != "ctx" for k, _ in chunk.ops):
            raise PatchSyntaxError(no, "a chunk changes nothing: expected at least one '-' or '+' line")
        op.chunks.append(chunk)
        i = j
    return i, chunk_no


def _need_path(p: str, no: int, marker: str) -> None:
    if not p:
        raise PatchSyntaxError(no, f"'{marker}' needs a path after the colon")


def _show(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:77] + "...")

"""The chord profile's grep output: hit lines ``path:line:text``, context lines
``| path-line-text``, merged windows, and the context budget.

Context lines spend the output budget but not the hit cap. Every kept hit line is printed; the
budget left after them pays for context in path/line order. When the next context line does not
fit, context stops: earlier windows are whole, the window being printed is cut there, later hits
show only their hit line, and a closing line says context was left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from zuno.tools.search.collect import FileHits, quote_path, shown_controls


@dataclass(slots=True)
class Rendered:
    lines: list[str]
    context_shown: int
    context_omitted: int
    budget_bytes: int
    budget_lines: int

    @property
    def closing(self) -> str:
        if not self.context_omitted:
            return ""
        return (
            f"[context left out: the output budget ({self.budget_bytes} bytes, {self.budget_lines} lines) could not "
            f"hold {self.context_omitted} more context line(s); earlier windows are whole, later hits show only "
            "their hit line. Narrow the search or lower context_lines to see more context.]"
        )


def hit_line(path: str, number: int, text: str) -> str:
    return f"{path}:{number}:{shown_controls(text)}"


def context_line(path: str, number: int, text: str) -> str:
    return f"| {path}-{number}-{text}"


def render(files: list[FileHits], budget_bytes: int, budget_lines: int) -> Rendered:
    quoted = [quote_path(f.path, grep=True) for f in files]
    hit_bytes = 0
    hit_count = 0
    for f, q in zip(files, quoted, strict=True):
        for ln in f.lines:
            if ln.hit:
                hit_bytes += len(hit_line(q, ln.number, ln.text).encode("utf-8", "surrogatepass")) + 1
                hit_count += 1
    room_bytes = budget_bytes - hit_bytes
    room_lines = budget_lines - hit_count
    out: list[str] = []
    shown = omitted = 0
    exhausted = False
    for f, q in zip(files, quoted, strict=True):
        for ln in f.lines:
            if ln.hit:
                out.append(hit_line(q, ln.number, ln.text))
                continue
            if exhausted:
                omitted += 1
                continue
            row = context_line(q, ln.number, ln.text)
            cost = len(row.encode("utf-8", "surrogatepass")) + 1
            if cost > room_bytes or room_lines < 1:
                exhausted = True
                omitted += 1
                continue
            out.append(row)
            room_bytes -= cost
            room_lines -= 1
            shown += 1
    return Rendered(out, shown, omitted, budget_bytes, budget_lines)

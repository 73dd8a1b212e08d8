"""A small terminal model for tests: interprets what the view wrote (text, SGR styles, ``\\r``,
``\\n``, erase line ``ESC[2K`` / ``ESC[K``, cursor up ``ESC[nA``) with auto-wrap at a width, and
gives the final screen, one string per row, styles kept inline."""

from __future__ import annotations

import re

from zuno.commands.terminal_width import char_width

_TOKEN = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])|\r|\n|.", re.S)


def screen(output: str, columns: int = 80) -> list[str]:
    rows: list[list[str]] = [[]]
    row, col, style = 0, 0, ""
    for m in _TOKEN.finditer(output):
        tok = m.group()
        if m.group(2):
            arg, op = m.group(1), m.group(2)
            if op == "m":
                if 0 < col <= len(rows[row]):
                    rows[row][col - 1] += tok  # a style after text closes on that text
                else:
                    style += tok
            elif op == "K":
                if arg == "2":
                    rows[row].clear()
                else:
                    del rows[row][col:]
            elif op == "A":
                row = max(0, row - int(arg or 1))
            continue
        if tok == "\r":
            col = 0
        elif tok == "\n":
            row, col = row + 1, 0
        else:
            w = char_width(tok) or 1
            if w and col + w > columns:
                row, col = row + 1, 0
            while len(rows) <= row:
                rows.append([])
            cells = rows[row]
            while len(cells) < col + w:
                cells.append(" ")
            cells[col] = style + tok
            style = ""
            for i in range(1, w):
                cells[col + i] = ""
            col += w
            continue
        while len(rows) <= row:
            rows.append([])
    return ["".join(r) for r in rows]

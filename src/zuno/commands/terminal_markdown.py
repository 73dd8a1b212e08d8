"""Streamed Markdown for the terminal: text deltas in, what to write out.

``MarkdownStream(color=True)`` is line-buffered: each completed line is rendered as it arrives
(headings bold, ``**bold**`` / ``*italic*``, ``inline code``, fenced code blocks dim with their
fence lines shown dim, bullet and numbered lists, block quotes, rules) and the partial last line
is rendered by ``finish()``. Control characters from the model are shown, never obeyed.
``MarkdownStream(color=False)`` hands back exactly the text it was given, byte for byte.
"""

from __future__ import annotations

import re

BOLD, NO_BOLD = "\x1b[1m", "\x1b[22m"
DIM = "\x1b[2m"
ITALIC, NO_ITALIC = "\x1b[3m", "\x1b[23m"
CODE, NO_CODE = "\x1b[36m", "\x1b[39m"
UNDERLINE, NO_UNDERLINE = "\x1b[4m", "\x1b[24m"
RESET = "\x1b[0m"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_BULLET = re.compile(r"^(\s*)[-*+][ \t]+(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d{1,9}[.)])[ \t]+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPH = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
# C0 controls but tab and newline, and DEL: shown as their Unicode control pictures.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _visible(text: str) -> str:
    return _CONTROLS.sub(lambda m: "\u2421" if m.group() == "\x7f" else chr(0x2400 + ord(m.group())), text)


def render_inline(text: str) -> str:
    """Code spans first (nothing inside them is emphasis), then bold, then italic. An unclosed
    marker stays as the model wrote it."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_emphasis(text[pos : m.start()]))
        out.append(f"{CODE}{m.group(2)}{NO_CODE}")
        pos = m.end()
    out.append(_emphasis(text[pos:]))
    return "".join(out)


def _emphasis(text: str) -> str:
    text = _STRONG.sub(lambda m: f"{BOLD}{m.group(2)}{NO_BOLD}", text)
    return _EMPH.sub(lambda m: f"{ITALIC}{m.group(1)}{NO_ITALIC}", text)


class MarkdownStream:
    def __init__(self, color: bool) -> None:
        self.color = color
        self._partial = ""
        self._fence: str | None = None  # the open fence's marker, e.g. "```"

    @property
    def pending(self) -> bool:
        """A partial line is held back (colour mode only)."""
        return bool(self._partial)

    def feed(self, text: str) -> str:
        if not self.color:
            return text
        self._partial += text
        if "\n" not in self._partial:
            return ""
        *lines, self._partial = self._partial.split("\n")
        return "".join(self._line(line) + "\n" for line in lines)

    def finish(self) -> str:
        """The partial last line, rendered (no newline added), and a clean state for a new stream."""
        line, self._partial = self._partial, ""
        out = self._line(line) if line else ""
        self._fence = None
        return out

    def _line(self, raw: str) -> str:
        line = _visible(raw.removesuffix("\r"))
        fence = _FENCE.match(line)
        if self._fence is not None:
            if (
                fence
                and fence.group(1)[0] == self._fence[0]
                and len(fence.group(1)) >= len(self._fence)
                and not fence.group(2).strip()
            ):
                self._fence = None
            return f"{DIM}{line}{RESET}"
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            self._fence = fence.group(1)
            return f"{DIM}{line}{RESET}"
        if m := _HEADING.match(line):
            body = render_inline(m.group(2)).replace(NO_BOLD, NO_BOLD + BOLD)
            if len(m.group(1)) == 1:
                return f"{BOLD}{UNDERLINE}{body}{NO_UNDERLINE}{NO_BOLD}"
            return f"{BOLD}{body}{NO_BOLD}"
        if _RULE.match(line):
            return f"{DIM}{'─' * 40}{RESET}"
        if m := _BULLET.match(line):
            return f"{m.group(1)}• {render_inline(m.group(2))}"
        if m := _NUMBERED.match(line):
            return f"{m.group(1)}{BOLD}{m.group(2)}{NO_BOLD} {render_inline(m.group(3))}"
        if m := _QUOTE.match(line):
            return f"{DIM}│{RESET} {render_inline(m.group(1))}"
        return render_inline(line)

"""Streamed Markdown for the terminal: text deltas in, what to write out.

``MarkdownStream(color=True)`` shows the text of the current (incomplete) line at once, plain, and
when the line completes replaces it with its rendered form (headings bold, ``**bold**`` /
``*italic*``, ``inline code``, fenced code blocks dim with their fence lines shown dim, bullet and
numbered lists, block quotes, rules): carriage return + erase line over the row the partial took,
the cursor moved up over the rows it wrapped to (counted with ``terminal_width.rows_used`` against
the terminal's width). When those rows cannot be counted (a character terminals disagree on, or a
terminal resized while the partial line was on it), the raw line stays and the rendered one
follows on its own line only if it reads differently. Inside a fenced code block the raw text is
the rendering: it streams dim and is never rewritten. A plain line that renders as itself is
never rewritten either. ``finish()`` completes the partial last line (no newline). Control
characters from the model are shown, never obeyed.
``MarkdownStream(color=False)`` hands back exactly the text it was given, byte for byte;
``MarkdownStream(color=False, visible=True)`` (a terminal without colour) the same text with its
control characters shown.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable

from zuno.commands.terminal_width import rows_used

BOLD, NO_BOLD = "\x1b[1m", "\x1b[22m"
DIM = "\x1b[2m"
ITALIC, NO_ITALIC = "\x1b[3m", "\x1b[23m"
CODE, NO_CODE = "\x1b[36m", "\x1b[39m"
UNDERLINE, NO_UNDERLINE = "\x1b[4m", "\x1b[24m"
RESET = "\x1b[0m"
ERASE_LINE = "\r\x1b[2K"
UP_ERASE = "\x1b[1A\x1b[2K"
_SGR = re.compile(r"\x1b\[[0-9;]*m")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_BULLET = re.compile(r"^(\s*)[-*+][ \t]+(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d{1,9}[.)])[ \t]+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
# Emphasis never runs over its own marker (the closer is the next one, as in CommonMark): with ``.+?``
# an opener with no closer scanned to the end of the line, and a long line of them was quadratic.
_STRONG = re.compile(r"\*\*(?=\S)((?:[^*]|\*(?!\*))+?)(?<=\S)\*\*|__(?=\S)((?:[^_]|_(?!_))+?)(?<=\S)__")
_EMPH = re.compile(r"(?<![*\w])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![*\w])")
# C0 controls but tab and newline, and DEL: shown as their Unicode control pictures. C1 controls
# (U+0080..U+009F: terminals that read UTF-8 obey U+009B as CSI, U+009D as OSC) have no pictures:
# shown as the escape sequence they stand for, U+009B as "␛[".
# Unicode bidirectional controls (embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069,
# the marks U+200E, U+200F and U+061C) reorder what a reader sees ("Trojan Source"): each is shown
# as <U+XXXX>, its code point, so nothing is lost and nothing is reordered.
# Characters that hide or fake text are shown the same way: the line and paragraph separators
# U+2028, U+2029 (a line break to a terminal or an editor, not to a line count), the invisible
# U+200B (zero width space), U+FEFF (zero-width no-break space, a byte order mark), U+00AD (soft
# hyphen), U+180E (Mongolian vowel separator), U+2060-U+2064 (word joiner, invisible operators),
# the deprecated format controls U+206A-U+206F, the interlinear annotation marks U+FFF9-U+FFFB, and
# the tag characters U+E0000-U+E007F (invisible ASCII: "ASCII smuggling"). Left as they are: the
# joiners U+200C, U+200D and the variation selectors, which emoji and several scripts need.
_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def _picture(ch: str) -> str:
    code = ord(ch)
    if code > 0x9F:
        return f"<U+{code:04X}>"
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else "\u241b" + chr(code - 0x40)


def _visible(text: str) -> str:
    return _CONTROLS.sub(lambda m: _picture(m.group()), text)


def visible_controls(text: str) -> str:
    """``text`` with its control characters (all but tab and newline: an escape sequence, a
    carriage return, a bell) shown as their Unicode control pictures, never obeyed by a terminal,
    and its bidi controls and invisible characters (``_CONTROLS``) shown as ``<U+202E>`` and the
    like, never reordering, breaking or hiding the line (what zuno show, zuno plan, zuno goal,
    zuno todo, zuno memory and zuno events print)."""
    return _visible(text)


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
    text = _STRONG.sub(lambda m: f"{BOLD}{m.group(1) or m.group(2)}{NO_BOLD}", text)
    return _EMPH.sub(lambda m: f"{ITALIC}{m.group(1)}{NO_ITALIC}", text)


def _columns() -> int:
    return shutil.get_terminal_size().columns


class MarkdownStream:
    def __init__(self, color: bool, columns: Callable[[], int] = _columns, *, visible: bool = False) -> None:
        self.color = color
        # Without colour on a terminal (NO_COLOR, TERM=dumb): the text unrendered, but its control
        # characters still shown, never obeyed (a CRLF's carriage return dropped).
        self.visible = visible and not color
        self.columns = columns
        # The partial line, kept as its deltas (a line of many deltas costs each one only its own
        # length: joining or scanning the whole line per delta made a long line quadratic).
        self._parts: list[str] = []
        self._held_cr = False  # the shown text stops before a carriage return that ended a delta
        self._shown: list[str] = []  # the visible text of the partial line already handed out
        self._shown_len = 0
        self._dim = False  # that text was handed out dim (inside a fence)
        self._widths: set[int] = set()  # the terminal's widths while that text was on it
        self._fence: str | None = None  # the open fence's marker, e.g. "```"

    @property
    def pending(self) -> bool:
        """A partial line has arrived and is not complete yet (colour mode only)."""
        return bool(self._parts)

    def feed(self, text: str) -> str:
        if not self.color and not self.visible:
            return text
        if not text:
            return ""
        if "\n" not in text:
            self._parts.append(text)
            return self._stream_partial(text)
        *lines, rest = "".join((*self._parts, text)).split("\n")
        self._parts = [rest] if rest else []
        self._held_cr = False
        out = "".join(self._complete(line) + "\n" for line in lines)
        return out + self._stream_partial(rest)

    def finish(self) -> str:
        """The partial last line, completed in its rendered form (no newline added), and a clean
        state for a new stream."""
        line, self._parts, self._held_cr = "".join(self._parts), [], False
        out = self._complete(line) if line else ""
        self._fence = None
        return out

    def _stream_partial(self, new: str) -> str:
        """What of the partial line is new since the last call (``new``, the raw text that came):
        plain (dim inside a fence). A trailing carriage return waits: it may be the first half of a
        CRLF."""
        raw = ("\r" if self._held_cr else "") + new
        self._held_cr = raw.endswith("\r")
        fresh = _visible(raw.removesuffix("\r"))
        if not fresh:
            return ""
        lead = ""
        if not self._shown_len and self._fence is not None:
            self._dim, lead = True, DIM
        self._shown.append(fresh)
        self._shown_len += len(fresh)
        self._widths.add(self.columns())
        return lead + fresh

    def _complete(self, raw: str) -> str:
        """The completed line: the rest of its raw text, or its rendered form over what was shown."""
        shown, dim, widths = "".join(self._shown), self._dim, self._widths
        self._shown, self._shown_len, self._dim, self._widths = [], 0, False, set()
        rendered = self._line(raw)
        full = _visible(raw.removesuffix("\r"))
        rest = full[len(shown) :]
        if not shown or (rendered == full and not dim):
            return rendered if not shown else rest
        if dim and rendered == f"{DIM}{full}{RESET}":
            return f"{rest}{RESET}"
        # A terminal resized while the text was on it may have reflowed it (or not): the rows it
        # takes now cannot be counted.
        columns = self.columns()
        rows = rows_used(shown, columns) if widths <= {columns} else None
        if rows is not None:
            return ERASE_LINE + UP_ERASE * (rows - 1) + rendered
        # the rows the raw text took cannot be counted: leave it, and add the rendered line
        # below only if it reads differently
        end = RESET if dim else ""
        if _SGR.sub("", rendered) == full:
            return rest + end
        return f"{rest}{end}\n{rendered}"

    def _line(self, raw: str) -> str:
        line = _visible(raw.removesuffix("\r"))
        if self.visible:
            return line
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

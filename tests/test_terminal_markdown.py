"""The streamed Markdown renderer of ``zuno run`` on tricky input, and the tool-call line."""

from __future__ import annotations

import re

from terminal_screen import screen
from zuno.agent.events import ToolResultEvent
from zuno.commands.run_view import call_subject, tool_line
from zuno.commands.terminal_markdown import (
    BOLD,
    CODE,
    DIM,
    ERASE_LINE,
    ITALIC,
    NO_BOLD,
    NO_CODE,
    NO_ITALIC,
    RESET,
    UP_ERASE,
    MarkdownStream,
)
from zuno.commands.terminal_width import rows_used

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def render(deltas: list[str]) -> str:
    """The final screen of a stream, rows joined by newlines."""
    return "\n".join(screen(written(deltas)))


def written(deltas: list[str], columns: int = 80) -> str:
    m = MarkdownStream(color=True, columns=lambda: columns)
    return "".join(m.feed(d) for d in deltas) + m.finish()


def test_without_colour_the_text_is_handed_back_byte_for_byte() -> None:
    text = "# T\n**b** `c` \x1b[31m\r\n```\nx\n"
    m = MarkdownStream(color=False)
    out = "".join(m.feed(text[i : i + 3]) for i in range(0, len(text), 3)) + m.finish()
    assert out == text


def test_the_partial_line_shows_at_once_and_is_replaced_by_its_rendering() -> None:
    m = MarkdownStream(color=True, columns=lambda: 80)
    assert m.feed("Some **bo") == "Some **bo" and m.pending
    assert m.feed("ld") == "ld"
    assert m.feed("** text\nnext") == f"{ERASE_LINE}Some {BOLD}bold{NO_BOLD} text\nnext"
    assert m.finish() == "" and not m.pending  # "next" renders as itself: never rewritten


def test_a_plain_line_is_never_rewritten_and_a_whole_line_is_rendered_directly() -> None:
    assert written(["plain ", "words\n", "**b**\n"]) == f"plain words\n{BOLD}b{NO_BOLD}\n"


def test_a_wrapped_partial_is_erased_over_every_row_it_took() -> None:
    out = written(["**" + "x" * 20, "**\n"], columns=10)  # 22 cells raw: three rows of ten
    assert out.endswith(f"{ERASE_LINE}{UP_ERASE * 2}{BOLD}{'x' * 20}{NO_BOLD}\n")
    assert screen(out, 10) == [f"{BOLD}{'x' * 10}", f"{'x' * 10}{NO_BOLD}", ""]
    exact = written(["*" + "y" * 8 + "*", "\n"], columns=10)  # exactly one row: the cursor waits on it
    assert exact == f"*{'y' * 8}*{ERASE_LINE}{ITALIC}{'y' * 8}{NO_ITALIC}\n"


def test_wide_characters_are_two_cells_and_wrap_early() -> None:
    assert rows_used("中" * 5, 10) == 1 and rows_used("a" + "中" * 5, 10) == 2
    assert rows_used("a" * 9 + "中", 10) == 2  # one cell left: the wide one goes to the next row
    out = written(["**" + "中" * 5, "**\n"], columns=10)  # 2 + 10 cells: two rows
    assert out.endswith(f"{ERASE_LINE}{UP_ERASE}{BOLD}{'中' * 5}{NO_BOLD}\n")
    assert screen(out, 10)[0] == f"{BOLD}{'中' * 5}{NO_BOLD}"


def test_an_uncountable_width_leaves_the_raw_line_and_adds_the_rendered_one_only_if_it_reads_differently() -> None:
    assert rows_used("—" * 6, 80) == 1  # ambiguous, but one row either way
    assert rows_used("—" * 6, 10) is None and rows_used("ok \u200d", 80) is None
    zwj = "\U0001f469\u200d\U0001f4bb"
    out = written([f"**{zwj}", " x**\n"])
    assert ERASE_LINE not in out and "\x1b[1A" not in out
    assert out == f"**{zwj} x**\n{BOLD}{zwj} x{NO_BOLD}\n"
    same = written([f"```{zwj}", "\n"])  # a fence line: only its style differs, nothing is repeated
    assert same == f"```{zwj}\n"


def test_inside_a_fence_the_raw_text_streams_dim_and_is_never_rewritten() -> None:
    out = written(["```\nx = *", "y*", "\n```\n"])
    assert out == f"{DIM}```{RESET}\n{DIM}x = *y*{RESET}\n{DIM}```{RESET}\n"


def test_a_crlf_split_across_deltas_shows_no_carriage_return() -> None:
    out = written(["**a**\r", "\nb\r", "c\n"])
    assert screen(out) == [f"{BOLD}a{NO_BOLD}", "b\u240dc", ""]


def test_a_fence_split_across_deltas_is_still_a_fence() -> None:
    out = render(["intro\n`", "``py", "\nx = **y** * `z`\n``", "`\n**after**\n"])
    lines = out.split("\n")
    assert lines[1] == f"{DIM}```py\x1b[0m"
    assert lines[2] == f"{DIM}x = **y** * `z`\x1b[0m"  # nothing inside a fence is Markdown
    assert lines[3] == f"{DIM}```\x1b[0m"
    assert lines[4] == f"{BOLD}after{NO_BOLD}"  # the fence closed


def test_a_longer_fence_is_closed_only_by_a_fence_as_long() -> None:
    out = render(["````\n```\nstill code\n````\nout *here*\n"])
    assert f"{DIM}still code" in out and f"out {ITALIC}here{NO_ITALIC}" in out


def test_stars_inside_inline_code_are_not_emphasis() -> None:
    out = render(["use `a*b*c` and `**x**` here\n"])
    assert out == f"use {CODE}a*b*c{NO_CODE} and {CODE}**x**{NO_CODE} here\n"


def test_unterminated_bold_and_arithmetic_stars_stay_as_written() -> None:
    assert render(["**unterminated bold\n"]) == "**unterminated bold\n"
    assert render(["2 * 3 * 4 and a*\n"]) == "2 * 3 * 4 and a*\n"
    assert render(["an unclosed `code span\n"]) == "an unclosed `code span\n"


def test_headings_lists_quotes_and_rules() -> None:
    out = render(["## Plan **now**\n- one\n  * two\n3. three\n> quoted `q`\n---\n"])
    plain = ANSI.sub("", out).split("\n")
    assert plain[:6] == ["Plan now", "• one", "  • two", "3. three", "│ quoted q", "─" * 40]
    assert out.startswith(BOLD) and f"{CODE}q{NO_CODE}" in out


def test_an_unterminated_fence_is_closed_by_the_end_of_the_stream() -> None:
    m = MarkdownStream(color=True)
    m.feed("```\ncode\n")
    m.finish()
    assert m.feed("**b**\n") == f"{BOLD}b{NO_BOLD}\n"


def test_control_characters_from_the_model_are_shown_not_obeyed() -> None:
    out = render(["red \x1b[31mtext\x07\n"])
    assert "\x1b[31m" not in out and "\x07" not in out and "\u241b[31m" in out


def test_tool_lines_name_the_subject_and_the_outcome() -> None:
    ok = ToolResultEvent("c1", "read", "ok", "…")
    assert tool_line("read", call_subject('{"path": "README.md"}'), ok) == "✓ read README.md"
    err = ToolResultEvent("c2", "shell", "error", "", exit_code=1)
    assert tool_line("shell", call_subject('{"command": "make\\n  test"}'), err) == "✗ shell make test — exit 1 (error)"
    blocked = ToolResultEvent("c3", "write", "blocked", "", block_kind="denied")
    assert tool_line("write", call_subject('{"path": "x.txt"}'), blocked) == "⊘ write x.txt (blocked: denied)"
    cancelled = ToolResultEvent("c4", "shell", "error", "", cancelled=True)
    assert tool_line("shell", "sleep 9", cancelled) == "⊘ shell sleep 9 (cancelled)"
    assert call_subject("{not json") == "" and call_subject("[1]") == ""
    long = tool_line("read", "x" * 500, ok)
    assert len(long) <= 100 and long.endswith("…")


def test_a_terminal_resized_under_a_partial_line_leaves_it_and_adds_the_rendering_below() -> None:
    # The partial wrapped at 10 columns; the terminal is 40 wide when the line completes: it may
    # or may not have reflowed it, so no erase is aimed at rows that cannot be counted.
    width = [10]
    m = MarkdownStream(color=True, columns=lambda: width[0])
    shown = m.feed("**" + "x" * 20)
    width[0] = 40
    out = shown + m.feed("**\n")
    assert ERASE_LINE not in out and "\x1b[1A" not in out
    assert out == f"**{'x' * 20}**\n{BOLD}{'x' * 20}{NO_BOLD}\n"
    # Resized between two deltas of the partial, and back: still uncertain.
    width[0] = 10
    m2 = MarkdownStream(color=True, columns=lambda: width[0])
    first = m2.feed("**ab")
    width[0] = 30
    second = m2.feed("cd")
    width[0] = 10
    assert ERASE_LINE not in first + second + m2.feed("**\n")
    # An unchanged width still erases exactly.
    kept = written(["**" + "x" * 20, "**\n"], columns=10)
    assert kept.endswith(f"{ERASE_LINE}{UP_ERASE * 2}{BOLD}{'x' * 20}{NO_BOLD}\n")

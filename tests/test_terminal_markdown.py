"""The streamed Markdown renderer of ``zuno run`` on tricky input, and the tool-call line."""

from __future__ import annotations

import re

from zuno.agent.events import ToolResultEvent
from zuno.commands.run_view import call_subject, tool_line
from zuno.commands.terminal_markdown import BOLD, CODE, DIM, ITALIC, NO_BOLD, NO_CODE, NO_ITALIC, MarkdownStream

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def render(deltas: list[str]) -> str:
    m = MarkdownStream(color=True)
    return "".join(m.feed(d) for d in deltas) + m.finish()


def test_without_colour_the_text_is_handed_back_byte_for_byte() -> None:
    text = "# T\n**b** `c` \x1b[31m\r\n```\nx\n"
    m = MarkdownStream(color=False)
    out = "".join(m.feed(text[i : i + 3]) for i in range(0, len(text), 3)) + m.finish()
    assert out == text


def test_a_completed_line_is_rendered_as_it_arrives_and_the_partial_one_waits() -> None:
    m = MarkdownStream(color=True)
    assert m.feed("Some **bo") == "" and m.pending
    assert m.feed("ld** text\nnext") == f"Some {BOLD}bold{NO_BOLD} text\n"
    assert m.finish() == "next" and not m.pending


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

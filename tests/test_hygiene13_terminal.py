"""What Zuno prints to a human terminal (outside testing, thirteenth round): ``zuno events`` shows an
event's control characters instead of letting them reorder or hide text, and ``visible_controls``
also shows the invisible and line-breaking characters that hide or fake text. ``--json`` keeps the
exact text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zuno.commands.terminal_markdown import visible_controls

from conftest import RunZuno

# Bidi controls, C0 and C1 controls, and the invisible / line-breaking characters of this round.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
INVISIBLE = "\u2028\u2029\u200b\ufeff\u00ad"
RAW = BIDI + INVISIBLE + "\x07\x1b\x9b\x9d\r"


def test_zuno_events_shows_an_events_controls_and_json_keeps_them(run_zuno: RunZuno) -> None:
    # A call to a tool of this name is refused, and its name is recorded in the event's payload.
    name = f"evil\u202e/ tsil\u202c\u2028fake line\u200b\ufeff\u00ad\x1b[2J\x9b31m{BIDI}"
    called = run_zuno("call", name, "{}")
    assert called.returncode == 1, called.stderr
    human = run_zuno("events", "-c")
    assert human.returncode == 0, human.stderr
    assert not any(ch in human.stdout for ch in RAW), ascii(human.stdout)
    assert "evil<U+202E>/ tsil<U+202C><U+2028>fake line<U+200B><U+FEFF><U+00AD>" in human.stdout
    assert "\u241b[31m" in human.stdout  # the C1 CSI shown as the escape sequence it stands for
    shown_bidi = "".join(f"<U+{ord(ch):04X}>" for ch in BIDI)
    assert shown_bidi in human.stdout
    assert len(human.stdout.splitlines()) == len(json.loads(run_zuno("events", "-c", "--json").stdout)["events"])
    exact = run_zuno("events", "-c", "--json")
    assert exact.returncode == 0, exact.stderr
    events = json.loads(exact.stdout)["events"]
    assert [e["data"]["tool"] for e in events if e["kind"] == "dispatch-blocked"] == [name]
    # the JSON as print_json writes it, the raw characters included (nothing pictured)
    assert exact.stdout == json.dumps(json.loads(exact.stdout), ensure_ascii=False, indent=2) + "\n"
    assert "\u202e" in exact.stdout and "\u2028" in exact.stdout and "\u241b" not in exact.stdout


@pytest.mark.parametrize(
    "ch",
    [
        "\u2028",  # line separator
        "\u2029",  # paragraph separator
        "\u200b",  # zero width space
        "\ufeff",  # zero-width no-break space (byte order mark)
        "\u00ad",  # soft hyphen
        "\u180e",  # Mongolian vowel separator
        "\u2060",  # word joiner
        "\u2061",  # function application
        "\u2062",  # invisible times
        "\u2063",  # invisible separator
        "\u2064",  # invisible plus
        "\u206a",  # inhibit symmetric swapping (deprecated format control)
        "\u206f",  # nominal digit shapes (deprecated format control)
        "\ufff9",  # interlinear annotation anchor
        "\ufffb",  # interlinear annotation terminator
        "\U000e0001",  # language tag
        "\U000e0041",  # tag latin capital letter A ("ASCII smuggling")
        "\U000e007f",  # cancel tag
    ],
)
def test_invisible_and_line_breaking_characters_are_shown_as_their_code_point(ch: str) -> None:
    assert visible_controls(f"a{ch}b") == f"a<U+{ord(ch):04X}>b"


def test_text_that_needs_its_joiners_and_selectors_is_left_as_it_is() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # an emoji ZWJ sequence
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # a zero width non-joiner inside a word
    heart = "\u2764\ufe0f"  # a variation selector
    for text in (family, persian, heart, "tab\tand\nnewline", "café ∑ 日本"):
        assert visible_controls(text) == text


def test_zuno_tools_shows_an_extension_descriptions_controls(workspace: Path, run_zuno: RunZuno) -> None:
    """A tool's description is not always Zuno's (an extension, a connected MCP server): zuno tools
    printed it raw, so it could clear the screen or reorder the table; --json keeps the exact text."""
    doc = "Looks \\u202eharmless\\u202c\\u2028\\x1b[2J\\x9b31m. More."
    (workspace / "mine.py").write_text(
        f'import zuno\n\n\n@zuno.tool(effect="ReadOnly")\nasync def mine(path: str) -> str:\n    """{doc}"""\n'
        '    return path\n'
    )
    (workspace / "zuno.json").write_text(json.dumps({"extensions": ["mine.py"]}))
    human = run_zuno("tools")
    assert human.returncode == 0, human.stderr
    (line,) = [ln for ln in human.stdout.splitlines() if ln.startswith("mine ")]
    assert line.endswith("Looks <U+202E>harmless<U+202C><U+2028>\u241b[2J\u241b[31m"), ascii(line)
    assert not any(ch in human.stdout for ch in RAW), ascii(human.stdout)
    rows = json.loads(run_zuno("tools", "--json").stdout)["tools"]
    (mine,) = [r for r in rows if r["name"] == "mine"]
    assert mine["description"].startswith("Looks \u202eharmless\u202c\u2028\x1b[2J\x9b31m")

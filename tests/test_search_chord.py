"""The chord profile's grep: roots, includes, context windows, quoting and the budget rules."""

from __future__ import annotations

import json
from pathlib import Path

from zuno import limits

from conftest import RunZuno, batch


def _chord(run_zuno: RunZuno, args: dict, env: dict | None = None) -> dict:
    return batch(run_zuno, [{"name": "grep", "arguments": args}], "--profile", "chord", env=env)["results"][0]


def _lines(n: int, hits: set[int], width: int = 0) -> str:
    return "".join((f"HIT {i}" if i in hits else f"ctx {i}" + "." * width) + "\n" for i in range(1, n + 1))


def test_hit_and_context_lines_and_merged_windows(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "f.txt").write_text(_lines(20, {5, 7, 15}))
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 1})
    assert r["outcome"] == "ok"
    # 4..8 is one merged window (hits 5 and 7 overlap); 14..16 another; no line twice
    assert r["text"].splitlines() == [
        "| f.txt-4-ctx 4",
        "f.txt:5:HIT 5",
        "| f.txt-6-ctx 6",
        "f.txt:7:HIT 7",
        "| f.txt-8-ctx 8",
        "| f.txt-14-ctx 14",
        "f.txt:15:HIT 15",
        "| f.txt-16-ctx 16",
    ]
    assert r["metadata"]["contextLines"] == 1 and r["metadata"]["matches"] == 3


def test_default_context_is_zero(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "f.txt").write_text(_lines(5, {3}))
    r = _chord(run_zuno, {"pattern": "HIT"})
    assert r["text"] == "f.txt:3:HIT 3"


def test_context_over_20_is_clamped_with_a_notice(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "f.txt").write_text(_lines(60, {30}))
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 50})
    lines = r["text"].splitlines()
    assert lines[0] == f"[notice: context_lines 50 is over the maximum {limits.CHORD_CONTEXT_MAX}; clamped to 20]"
    body = lines[1:]
    assert body[0] == "| f.txt-10-ctx 10" and body[-1] == "| f.txt-50-ctx 50"
    assert len(body) == 41
    assert r["metadata"]["contextClamped"] == {"asked": 50, "used": 20}
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 20})
    assert "notice" not in r["text"] and len(r["text"].splitlines()) == 41
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": -1})
    assert r["block_kind"] == "invalid_arguments"


def test_paths_with_whitespace_or_ambiguous_separators_are_quoted(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "my file.txt").write_text("a\nHIT\n")
    (workspace / "x:12:y.txt").write_text("a\nHIT\n")
    (workspace / "v-3-w.txt").write_text("a\nHIT\n")
    (workspace / "plain-name.txt").write_text("a\nHIT\n")
    (workspace / 'q"uote.txt').write_text("a\nHIT\n")
    (workspace / "back\\slash.txt").write_text("a\nHIT\n")
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 1})
    assert r["text"].splitlines() == [
        "| back\\slash.txt-1-a",
        "back\\slash.txt:2:HIT",
        '| "my file.txt"-1-a',
        '"my file.txt":2:HIT',
        "| plain-name.txt-1-a",
        "plain-name.txt:2:HIT",
        '| "q\\"uote.txt"-1-a',
        '"q\\"uote.txt":2:HIT',
        '| "v-3-w.txt"-1-a',
        '"v-3-w.txt":2:HIT',
        '| "x:12:y.txt"-1-a',
        '"x:12:y.txt":2:HIT',
    ]
    for line in r["text"].splitlines():  # quoted paths are JSON strings naming the real file
        if line.startswith('"'):
            name = json.JSONDecoder().raw_decode(line)[0]
            assert (workspace / name).is_file()


def test_long_context_lines_are_shortened_to_256_bytes(workspace: Path, run_zuno: RunZuno) -> None:
    long_ctx = "é" * 300  # 600 bytes
    hit = "HIT " + "y" * 400  # hit lines are not shortened (only capped at 2000 UTF-16 units)
    (workspace / "f.txt").write_text(f"{long_ctx}\n{hit}\n{'z' * 256}\n")
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 1})
    before, hit_line, after = r["text"].splitlines()
    text = before.removeprefix("| f.txt-1-")
    assert text.endswith("...") and len(text.encode()) <= limits.CHORD_CONTEXT_LINE_MAX_BYTES
    assert len(text.encode()) >= limits.CHORD_CONTEXT_LINE_MAX_BYTES - 4
    assert text[:-3] == "é" * len(text[:-3])
    assert hit_line == f"f.txt:2:{hit}"
    assert after == "| f.txt-3-" + "z" * 256  # exactly 256 bytes stays whole


def test_several_roots_and_includes(workspace: Path, run_zuno: RunZuno) -> None:
    for d in ("a", "b", "c"):
        (workspace / d).mkdir()
        (workspace / d / "m.go").write_text("needle\n")
        (workspace / d / "m.py").write_text("needle\n")
    r = _chord(run_zuno, {"pattern": "needle", "paths": ["c", "a"], "includes": ["*.go", "*.md"]})
    assert r["text"].splitlines() == ["a/m.go:1:needle", "c/m.go:1:needle"]


def test_budget_exhaustion_keeps_earlier_windows_and_later_hit_lines(workspace: Path, run_zuno: RunZuno) -> None:
    # 12 hits, each with 3 context lines either side of ~100 bytes; a budget that holds ~2.5 windows.
    hits = {10 * k for k in range(1, 13)}
    (workspace / "f.txt").write_text(_lines(130, hits, width=90))
    budget = 2_600
    env = {
        "ZUNO_CONFIG_CONTENT": json.dumps({"tool_output": {"max_bytes": budget + limits.CHORD_BUDGET_RESERVE_BYTES}})
    }
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 3}, env=env)
    assert r["outcome"] == "ok" and "withheld" not in r["text"]
    lines = r["text"].splitlines()
    closing = lines[-1]
    assert closing.startswith("[context left out:") and "later hits show only their hit line" in closing
    body = lines[:-1]
    hit_rows = [ln for ln in body if not ln.startswith("| ")]
    assert hit_rows == [f"f.txt:{h}:HIT {h}" for h in sorted(hits)]  # every hit, in order
    # earlier windows are whole: the first window has all six context lines
    first = body[: body.index("f.txt:10:HIT 10") + 4]
    assert [ln.split("-")[1] for ln in first if ln.startswith("| ")] == ["7", "8", "9", "11", "12", "13"]
    # after the budget ran out, hits list only their hit line
    tail = body[body.index("f.txt:110:HIT 110") :]
    assert all(not ln.startswith("| ") for ln in tail)
    # a window was cut early: context shown is a prefix (no context line after the first gap)
    ctx_numbers = [int(ln.split("-")[1]) for ln in body if ln.startswith("| ")]
    assert ctx_numbers == sorted(ctx_numbers)
    shown_bytes = sum(len(ln.encode()) + 1 for ln in body)
    assert shown_bytes <= budget
    assert r["metadata"]["contextOmitted"] > 0 and r["metadata"]["matches"] == 12
    # context lines do not spend the hit cap
    assert r["metadata"]["truncated"] is False


def test_chord_hit_cap_ignores_context(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "f.txt").write_text(_lines(40, {5, 15, 25, 35}))
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"grep_max_hits": 2}})}
    r = _chord(run_zuno, {"pattern": "HIT", "context_lines": 2}, env=env)
    lines = r["text"].splitlines()
    assert [ln for ln in lines if ln.startswith("f.txt:")] == ["f.txt:5:HIT 5", "f.txt:15:HIT 15"]
    assert sum(1 for ln in lines if ln.startswith("| ")) == 8
    assert "| f.txt-23-ctx 23" not in lines  # no context of a dropped hit
    assert "[truncated: showing the first 2 of 4 matches" in r["text"]

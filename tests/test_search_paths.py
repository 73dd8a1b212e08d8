"""Paths are identifiers; lines and records are capped; the order is stable."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from zuno import limits
from zuno.tools.search.collect import GrepCollector, cap_utf16
from zuno.tools.search.glob_collect import GlobCollector

from conftest import RunZuno, batch


def _one(run_zuno: RunZuno, name: str, args: dict, *extra: str, env: dict | None = None) -> dict:
    return batch(run_zuno, [{"name": name, "arguments": args}], *extra, env=env)["results"][0]


def _bad_name(workspace: Path, content: bytes) -> None:
    with open(os.path.join(os.fsencode(workspace), b"legacy-\xe9t\xe9.txt"), "wb") as f:
        f.write(content)


def test_non_utf8_name_is_left_out_and_marked_truncated(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "good.txt").write_text("needle here\n")
    (workspace / "zz.txt").write_text("needle there\n")
    _bad_name(workspace, b"needle hidden\n")
    g = _one(run_zuno, "glob", {"pattern": "*.txt"})
    assert g["outcome"] == "ok"
    assert g["metadata"]["paths"] == ["good.txt", "zz.txt"]
    assert g["text"].splitlines()[:2] == ["good.txt", "zz.txt"]
    assert "truncated" in g["text"] and "not valid UTF-8" in g["text"]
    assert "\ufffd" not in g["text"]
    assert g["metadata"]["truncated"] is True and g["metadata"]["dropped"]["unnameablePaths"] == 1
    r = _one(run_zuno, "grep", {"pattern": "needle"})
    assert r["text"].splitlines()[:2] == ["good.txt:1:needle here", "zz.txt:1:needle there"]
    assert "truncated" in r["text"] and "\ufffd" not in r["text"]
    assert r["metadata"]["dropped"]["unnameablePaths"] == 1
    c = _one(run_zuno, "grep", {"pattern": "needle"}, "--profile", "chord")
    assert "truncated" in c["text"] and "legacy" not in c["text"]


def test_only_an_unnameable_match_reads_no_files_found_truncated(workspace: Path, run_zuno: RunZuno) -> None:
    _bad_name(workspace, b"needle\n")
    r = _one(run_zuno, "grep", {"pattern": "needle"})
    assert r["outcome"] == "ok"
    assert r["text"].startswith("No files found") and "truncated" in r["text"]


def test_backslash_and_newline_names(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "back\\slash.txt").write_text("needle\n")
    (workspace / "new\nline.txt").write_text("needle\n")
    (workspace / "plain.txt").write_text("needle\n")
    g = _one(run_zuno, "glob", {"pattern": "*.txt"})
    assert g["metadata"]["paths"] == ["back\\slash.txt", "new\nline.txt", "plain.txt"]
    # a backslash is an ordinary byte: verbatim; a newline is one path, printed as a JSON string
    assert g["text"].splitlines() == ["back\\slash.txt", '"new\\nline.txt"', "plain.txt"]
    r = _one(run_zuno, "grep", {"pattern": "needle"})
    assert r["text"].splitlines() == ["back\\slash.txt:1:needle", '"new\\nline.txt":1:needle', "plain.txt:1:needle"]
    assert r["metadata"]["files"] == 3 and r["metadata"]["truncated"] is False


def test_each_path_exactly_once_with_overlapping_roots(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("needle\n")
    (workspace / "b.py").write_text("needle\n")
    r = _one(run_zuno, "grep", {"pattern": "needle", "paths": ["src", ".", "src/a.py", "./src/"]}, "--profile", "chord")
    assert r["text"].splitlines() == ["b.py:1:needle", "src/a.py:1:needle"]
    r = _one(run_zuno, "grep", {"pattern": "needle", "paths": ["src/a.py", "b.py"]}, "--profile", "chord")
    assert r["text"].splitlines() == ["b.py:1:needle", "src/a.py:1:needle"]


def test_a_3000_emoji_line_is_capped_at_2000_utf16_units(workspace: Path, run_zuno: RunZuno) -> None:
    emoji = "\U0001f600"
    (workspace / "e.txt").write_text("needle" + emoji * 3000 + "\n", encoding="utf-8")
    r = _one(run_zuno, "grep", {"pattern": "needle"})
    line = r["text"].splitlines()[0]
    text = line.split(":", 2)[2]
    assert text.startswith("needle")
    units = len(text.encode("utf-16-le")) // 2
    assert units <= limits.MATCH_LINE_MAX_UTF16
    assert units >= limits.MATCH_LINE_MAX_UTF16 - 1  # cut at the cap, never inside a surrogate pair
    assert text.endswith(emoji)
    assert r["metadata"]["linesCapped"] == 1
    assert "2000 UTF-16" in r["text"]


def test_cap_utf16_counts_astral_characters_twice() -> None:
    s = "a" + "\U0001f600" * 1000
    out, capped = cap_utf16(s)
    assert capped and out == "a" + "\U0001f600" * 999
    assert cap_utf16("x" * 2000) == ("x" * 2000, False)
    assert cap_utf16("x" * 2001) == ("x" * 2000, True)


def test_a_record_over_1_mib_is_skipped(workspace: Path, run_zuno: RunZuno) -> None:
    big = "needle" + "x" * limits.RG_RECORD_MAX_BYTES + "\n"
    (workspace / "a.txt").write_text("needle small\n" + big + "needle after\n")
    r = _one(run_zuno, "grep", {"pattern": "needle"})
    assert r["text"].splitlines()[:2] == ["a.txt:1:needle small", "a.txt:3:needle after"]
    assert r["metadata"]["dropped"]["oversizedRecords"] == 1
    assert "truncated" in r["text"] and "over 1 MiB" in r["text"]
    # just under the ceiling is kept (and its line capped)
    ok = "needle" + "x" * (limits.RG_RECORD_MAX_BYTES - 100) + "\n"
    (workspace / "a.txt").write_text(ok)
    r = _one(run_zuno, "grep", {"pattern": "needle"})
    assert r["metadata"]["matches"] == 1 and r["metadata"]["truncated"] is False


def test_collectors_stream_records_split_anywhere() -> None:
    data = b"b\x00" + b"3:two\n" + b"a\nx\x001:one\n" + b"a\nx\x002-ctx\n" + b"c\x001:" + b"q" * 50 + b"\n"
    for step in (1, 2, 7, len(data)):
        col = GrepCollector(cap=10, context=1)
        for i in range(0, len(data), step):
            col.feed(data[i : i + step])
        files = col.finish()
        assert [f.path for f in files] == ["a\nx", "b", "c"]
        assert [(ln.number, ln.hit) for ln in files[0].lines] == [(1, True), (2, False)]
    g = GlobCollector(cap=2)
    for part in (b"c\x00a", b"\x00b\x00", b"\xff\x00"):
        g.feed(part)
    assert g.finish() == ["a", "b"]
    assert (g.total, g.drops.over_cap, g.drops.unnameable) == (3, 1, 1)


def test_same_search_twice_is_byte_identical_on_thousands_of_files(workspace: Path, run_zuno: RunZuno) -> None:
    for d in range(40):
        sub = workspace / f"d{d:02d}" / "deep"
        sub.mkdir(parents=True)
        for i in range(60):
            (sub / f"f{i:03d}.txt").write_text(f"alpha {d} {i}\nbeta\nalpha again\n")
    cfg = {"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"glob_max_results": 5000, "grep_max_hits": 10000}})}
    calls = [
        {"name": "glob", "arguments": {"pattern": "*.txt"}},
        {"name": "grep", "arguments": {"pattern": "alpha"}},
        {"name": "glob", "arguments": {"pattern": "*.txt"}},
        {"name": "grep", "arguments": {"pattern": "alpha"}},
    ]
    raw = {"accept_large_output": True}
    calls = [{**c, "arguments": {**c["arguments"], **raw}} for c in calls]
    a = batch(run_zuno, calls, env=cfg)["results"]
    b = batch(run_zuno, calls, env=cfg)["results"]
    assert a[0]["text"] == a[2]["text"] == b[0]["text"] == b[2]["text"]
    assert a[1]["text"] == a[3]["text"] == b[1]["text"] == b[3]["text"]
    paths = a[0]["text"].splitlines()
    assert len(paths) == 2400 and paths == sorted(paths)
    hits = a[1]["text"].splitlines()
    assert len(hits) == 4800 and hits[:2] == ["d00/deep/f000.txt:1:alpha 0 0", "d00/deep/f000.txt:3:alpha again"]


def test_result_caps_say_truncated(workspace: Path, run_zuno: RunZuno) -> None:
    for i in range(30):
        (workspace / f"f{i:02d}.txt").write_text("hit\nhit\n")
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"glob_max_results": 10, "grep_max_hits": 7}})}
    g = _one(run_zuno, "glob", {"pattern": "*.txt"}, env=env)
    assert g["metadata"]["paths"] == [f"f{i:02d}.txt" for i in range(10)]
    assert "[truncated: showing the first 10 of 30 paths in path order" in g["text"]
    r = _one(run_zuno, "grep", {"pattern": "hit"}, env=env)
    assert r["text"].splitlines()[:7] == [f"f{i // 2:02d}.txt:{i % 2 + 1}:hit" for i in range(7)]
    assert "[truncated: showing the first 7 of 60 matches in path order" in r["text"]
    assert r["metadata"]["dropped"]["overCap"] == 53


def test_glob_pattern_is_relative_to_path_and_skips_state_and_git(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "pkg" / "m.py").write_text("")
    (workspace / "top.py").write_text("")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "hook.py").write_text("")
    (workspace / ".hidden.py").write_text("")
    g = _one(run_zuno, "glob", {"pattern": "pkg/*.py", "path": "src"})
    assert g["metadata"]["paths"] == ["src/pkg/m.py"]
    g = _one(run_zuno, "glob", {"pattern": "*.py"})
    assert g["metadata"]["paths"] == [".hidden.py", "src/pkg/m.py", "top.py"]
    g = _one(run_zuno, "glob", {"pattern": "*.db"})  # .zuno/zuno.db exists but is Zuno's state
    assert g["text"] == "No files found"


def test_glob_on_a_file_is_refused(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.txt").write_text("")
    g = _one(run_zuno, "glob", {"pattern": "*", "path": "a.txt"})
    assert g["block_kind"] == "invalid_arguments" and "not a directory" in g["text"]


def test_a_binary_file_named_as_the_path_is_reported_not_silent(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "blob.bin").write_bytes(b"needle\x00\x01\x02needle\n")
    (workspace / "text.txt").write_text("needle\n")
    r = _one(run_zuno, "grep", {"pattern": "needle"})  # walked: rg skips the binary file
    assert r["text"] == "text.txt:1:needle"
    r = _one(run_zuno, "grep", {"pattern": "needle", "path": "blob.bin"})
    assert r["outcome"] == "ok"
    assert "No files found" not in r["text"]  # it matched: the status line says so, alone
    assert "1 binary file(s) named in the search path matched" in r["text"]
    assert r["metadata"]["dropped"]["binaryFiles"] == 1


def test_granted_directory_outside_the_root(workspace: Path, run_zuno: RunZuno, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    (extra / "lib").mkdir(parents=True)
    (extra / "lib" / "x.py").write_text("needle\n")
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"workspace": {"granted_dirs": [str(extra)]}})}
    r = _one(run_zuno, "grep", {"pattern": "needle", "path": str(extra)}, env=env)
    assert r["text"] == f"{extra}/lib/x.py:1:needle"
    g = _one(run_zuno, "glob", {"pattern": "*.py", "path": str(extra / "lib")}, env=env)
    assert g["metadata"]["paths"] == [f"{extra}/lib/x.py"]


def test_collectors_keep_exactly_the_first_n_in_path_order_whatever_the_walk_order() -> None:
    rnd = random.Random(7)
    names = [f"d{rnd.randrange(50):02d}/f{i:05d}.txt".encode() for i in range(20_000)]
    rnd.shuffle(names)
    g = GlobCollector(cap=25)
    stream = b"".join(n + b"\0" for n in names)
    for i in range(0, len(stream), 4096):
        g.feed(stream[i : i + 4096])
    assert g.finish() == [n.decode() for n in sorted(names)[:25]]
    assert (g.total, g.drops.over_cap) == (20_000, 20_000 - 25)
    for trial in range(20):
        files = {
            f"p{rnd.randrange(10_000):05d}".encode(): sorted(
                rnd.sample(range(1, 3000), rnd.choice([rnd.randint(1, 30), rnd.randint(60, 900)]))
            )
            for _ in range(300)
        }
        unnameable = {b"\xff%d" % i: list(range(1, rnd.randint(2, 400))) for i in range(3)}
        order = list(files) + list(unnameable)
        rnd.shuffle(order)
        every = {**files, **unnameable}
        stream = b"".join(k + b"\0" + str(n).encode() + b":x\n" for k in order for n in every[k])
        cap = rnd.choice([1, 7, 100, 5000])
        col = GrepCollector(cap=cap)
        step = rnd.choice([1 << 10, 1 << 16, len(stream)])
        for i in range(0, len(stream), step):
            col.feed(stream[i : i + step])
        got = [(f.path, ln.number) for f in col.finish() for ln in f.lines]
        want = [(k.decode(), n) for k in sorted(files) for n in files[k]][:cap]
        assert got == want, trial
        assert col.total_hits == sum(len(v) for v in every.values())
        assert col.drops.unnameable == sum(len(v) for v in unnameable.values())
        assert col.drops.over_cap == col.total_hits - len(want) - col.drops.unnameable


def test_patterns_and_names_that_look_like_options(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "-rf.txt").write_text("--files\n-e x\n")
    r = _one(run_zuno, "grep", {"pattern": "-e x", "include": "-rf*"})
    assert r["text"] == "-rf.txt:2:-e x"
    r = _one(run_zuno, "grep", {"pattern": "--files", "path": "-rf.txt"})
    assert r["text"] == "-rf.txt:1:--files"
    g = _one(run_zuno, "glob", {"pattern": "-rf*"})
    assert g["metadata"]["paths"] == ["-rf.txt"]

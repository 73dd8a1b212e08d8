"""Outside testing of the file tools (tenth round): glob, grep, read, write, edit, apply_patch and
delete driven through the Python API (``zuno.Runtime``, ``Session.step``) with the inputs models
and users send. Each test here failed before the fix it names."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import zuno


def _steps(
    root: Path, *steps: list[tuple[str, dict[str, Any]]], profile: str = "zuno", config: dict[str, Any] | None = None
) -> list[list[Any]]:
    """Run each list of (tool, arguments) as one step of one session; the records of every step."""

    async def main() -> list[list[Any]]:
        out = []
        async with (
            zuno.Runtime(root=root, profile=profile, config_overrides=config) as rt,
            rt.session() as session,
        ):
            for calls in steps:
                step = await session.step([{"name": n, "arguments": a} for n, a in calls])
                out.append(step.results)
        return out

    return asyncio.run(main())


def _one(root: Path, name: str, profile: str = "zuno", **args: Any) -> Any:
    return _steps(root, [(name, args)], profile=profile)[0][0]


def test_grep_dollar_ends_the_lines_of_a_crlf_file(workspace: Path) -> None:
    """rg's "$" does not match before "\\r\\n", so `x$` found nothing in a Windows file whose lines
    read shows ending in x; a pattern naming "\\r" itself still finds it."""
    (workspace / "win.txt").write_bytes(b"alpha\r\nbeta\r\ngamma")
    (workspace / "unix.txt").write_bytes(b"alpha\nbeta\n")
    for profile in ("zuno", "chord"):
        res = _one(workspace, "grep", profile=profile, pattern="^beta$")
        assert res.outcome == "ok", res.text
        assert res.text.splitlines() == ["unix.txt:2:beta", "win.txt:2:beta"]
    cr = _one(workspace, "grep", pattern=r"ha\r$")
    assert cr.outcome == "ok" and cr.text.splitlines() == ["win.txt:1:alpha"], cr.text
    assert _one(workspace, "grep", pattern="gamma$").text == "win.txt:3:gamma"


def test_a_pattern_that_can_only_match_a_line_break_is_refused_naming_it(workspace: Path) -> None:
    """A "\\n" in the pattern (escaped, literal or in a class) was an `error` quoting rg's advice to
    pass --multiline, a flag grep does not take; it is a refusal saying grep matches one line at a
    time."""
    (workspace / "a.txt").write_text("one\ntwo\n")
    for pattern in (r"one\ntwo", "one\ntwo", r"[\n]", r"\x0a"):
        res = _one(workspace, "grep", pattern=pattern)
        assert res.outcome == "blocked" and res.block_kind == "invalid_arguments", res.text
        assert json.dumps(pattern) in res.text and "one line at a time" in res.text
        assert "--multiline" not in res.text


def test_a_glob_starting_with_dot_slash_or_an_absolute_path_finds_what_it_names(workspace: Path) -> None:
    """"./*.py", "./src/*.py" and "/abs/workspace/src/*.py" (what models send) were "No files
    found" though the files are there; an absolute path elsewhere in the workspace is refused, and
    "/src/*.py" stays anchored at the search path."""
    (workspace / "src" / "deep").mkdir(parents=True)
    for rel in ("top.py", "src/a.py", "src/deep/b.py"):
        (workspace / rel).write_text("hit\n")
    root = str(workspace.resolve())
    want = {
        "./*.py": ["top.py"],
        "./src/*.py": ["src/a.py"],
        "src/./deep/*.py": ["src/deep/b.py"],
        f"{root}/src/*.py": ["src/a.py"],
        f"{root}/**/b.py": ["src/deep/b.py"],
        "/src/*.py": ["src/a.py"],
    }
    for pattern, paths in want.items():
        res = _one(workspace, "glob", pattern=pattern)
        assert res.outcome == "ok" and res.metadata["paths"] == paths, (pattern, res.text)
    link = workspace.parent / "ws-link"  # the workspace by another name (macOS: /tmp -> /private/tmp)
    link.symlink_to(workspace, target_is_directory=True)
    via = _one(workspace, "glob", pattern=f"{link}/src/*.py")
    assert via.metadata["paths"] == ["src/a.py"], via.text
    inside = _one(workspace, "glob", pattern=f"{root}/src/*.py", path="src")
    assert inside.metadata["paths"] == ["src/a.py"], inside.text
    elsewhere = _one(workspace, "glob", pattern=f"{root}/*.py", path="src")
    assert elsewhere.outcome == "blocked" and elsewhere.block_kind == "invalid_arguments"
    assert "absolute path" in elsewhere.text and "'pattern'" in elsewhere.text
    inc = _one(workspace, "grep", pattern="hit", include="./src/*.py")
    assert inc.text == "src/a.py:1:hit", inc.text
    chord = _one(workspace, "grep", profile="chord", pattern="hit", includes=[f"{root}/src/deep/*.py"])
    assert chord.text == "src/deep/b.py:1:hit", chord.text


def test_a_utf16_file_is_named_as_text_in_another_encoding_not_as_binary(workspace: Path) -> None:
    """read said a UTF-16 file (a BOM, as Windows tools write them) was "a binary file ... Inspect it
    with a tool meant for its format", while grep found its lines; it names the encoding and how
    to see the text."""
    (workspace / "le.txt").write_bytes("\ufeffhello\r\n".encode("utf-16-le"))
    (workspace / "be.txt").write_bytes("\ufeffhello\n".encode("utf-16-be"))
    (workspace / "bin.dat").write_bytes(b"\x00\x01\x02")
    le = _one(workspace, "read", path="le.txt")
    assert le.outcome == "error" and "UTF-16LE text" in le.text and "binary" not in le.text, le.text
    assert "iconv -f UTF-16 -t UTF-8 le.txt" in le.text
    assert "UTF-16BE text" in _one(workspace, "read", path="be.txt").text
    assert "is a binary file" in _one(workspace, "read", path="bin.dat").text
    assert _one(workspace, "grep", pattern="hello$").text.splitlines() == ["be.txt:1:hello", "le.txt:1:hello"]


def test_read_of_a_missing_file_suggests_names_it_can_use(workspace: Path) -> None:
    """The "Did you mean" of a missing file gave absolute paths, and offered a name that is not
    UTF-8 (as "\\udcff"), which no argument can name; it gives workspace paths a read can take."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "config.yaml").write_text("x\n")
    (workspace / "sub" / b"confi\xffg.yaml".decode("utf-8", "surrogateescape")).write_text("y\n")
    res = _one(workspace, "read", path="sub/config.yml")
    assert res.outcome == "error"
    assert 'Did you mean: "sub/config.yaml"?' in res.text, res.text
    assert str(workspace) not in res.text and "\\udcff" not in res.text


def test_a_name_glob_respects_gitignore_and_ignore(workspace: Path) -> None:
    """glob `*.log` listed the .gitignore'd logs, and `*` / `**` listed every file of an ignored
    node_modules/ (rg's --glob is an override of every ignore rule); grep's include searched them.
    A file-name glob now only filters what the ignore rules leave; a path glob still names where
    to look."""
    (workspace / ".git").mkdir()
    (workspace / ".gitignore").write_text("*.log\n!keep.log\nnode_modules/\nbuild/\n")
    (workspace / ".ignore").write_text("!build/\n")
    for rel in ("logs/a.log", "logs/keep.log", "node_modules/pkg/i.js", "build/out.txt", "src/m.js", "top.txt"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text("hit\n")
    kept = [".gitignore", ".ignore", "build/out.txt", "logs/keep.log", "src/m.js", "top.txt"]
    for pattern in ("*", "**", "**/*"):
        res = _one(workspace, "glob", pattern=pattern)
        assert res.metadata["paths"] == kept, (pattern, res.text)
    assert _one(workspace, "glob", pattern="*.log").metadata["paths"] == ["logs/keep.log"]
    assert _one(workspace, "glob", pattern="**/*.{js,log}").metadata["paths"] == ["logs/keep.log", "src/m.js"]
    assert _one(workspace, "glob", pattern="!*.txt").metadata["paths"] == [*kept[:2], "logs/keep.log", "src/m.js"]
    assert _one(workspace, "glob", pattern="logs/*.log").metadata["paths"] == ["logs/a.log", "logs/keep.log"]
    assert _one(workspace, "grep", pattern="hit", include="*.log").text == "logs/keep.log:1:hit"
    chord = _one(workspace, "grep", profile="chord", pattern="hit", includes=["*.js", "*.log"])
    assert chord.text.splitlines() == ["logs/keep.log:1:hit", "src/m.js:1:hit"]
    named = _one(workspace, "grep", pattern="hit", path="node_modules", include="*.js")
    assert named.text == "node_modules/pkg/i.js:1:hit", named.text


def test_a_line_longer_than_the_page_is_cut_to_fit_not_withheld_with_the_page(workspace: Path) -> None:
    """read of a minified bundle (one 200 KB line) was withheld whole into an artifact ("read it
    back with bg artifact") although the page is bounded to fit the output limits; the line is
    cut to what the page holds, with a note giving its length, and the next line stays readable."""
    line = "var a=1;" * 25_000
    (workspace / "min.js").write_text(line + "\nconsole.log(a)\n")
    for limit in (None, 8000):
        config = {"tool_output": {"max_bytes": limit}} if limit else None
        res = _steps(workspace, [("read", {"path": "min.js"})], config=config)[0][0]
        cap = limit or 51200
        assert res.outcome == "ok" and "withheldOutput" not in res.metadata, res.text[:300]
        assert len(res.text.encode()) <= cap
        first, second = res.text.split("\n")[:2]
        shown = first.split("\t", 1)[1].split(" [...", 1)[0]
        assert line.startswith(shown) and len(shown) > cap // 2
        assert f"line 1 is {len(line)} bytes; read holds its first {len(shown)}." in first
        assert second == "2\tconsole.log(a)" or "continue with offset=2" in res.text


def test_delete_of_a_link_named_by_its_absolute_path_is_refused_like_the_relative_name(workspace: Path) -> None:
    """delete refused `link.txt` (a symbolic link) but, named as /abs/ws/link.txt, deleted the file
    the link points to and left the link dangling."""
    (workspace / "target.txt").write_text("keep me\n")
    (workspace / "link.txt").symlink_to("target.txt")
    absolute = str(workspace.resolve() / "link.txt")
    for name in (absolute, "link.txt"):
        read, deleted = (
            r[0] for r in _steps(workspace, [("read", {"path": name})], [("delete", {"path": name})], profile="chord")
        )
        assert read.outcome == "ok"
        assert deleted.outcome == "error" and "is a symbolic link" in deleted.text, deleted.text
        assert (workspace / "target.txt").read_text() == "keep me\n" and (workspace / "link.txt").is_symlink()


def test_ambiguous_patch_context_names_the_anchor_that_picks_each_match(workspace: Path) -> None:
    """A chunk whose context matched twice was told to "add an '@@ <line>' anchor", which models
    read as a line number (`@@ 4`, then "its anchor line '4' is not in the file"); the conflict now
    names, for each match, the '@@' text that selects it, and that anchor applies."""
    (workspace / "m.py").write_text("def f():\n    a\n    b\n\ndef g():\n    a\n    b\n")
    body = "     a\n-    b\n+    B\n"
    patch = "*** Begin Patch\n*** Update File: m.py\n@@{}\n" + body + "*** End Patch"
    read = ("read", {"path": "m.py"})
    _read, first = (r[0] for r in _steps(workspace, [read], [("apply_patch", {"patch": patch.format("")})]))
    assert first.outcome == "error" and first.metadata["conflict"]["kind"] == "ContextMismatch"
    assert "'@@ def f():' for line 2, '@@ def g():' for line 6" in first.text, first.text
    assert "not as a line number" in first.text
    _read, done = (r[0] for r in _steps(workspace, [read], [("apply_patch", {"patch": patch.format(" def g():")})]))
    assert done.outcome == "ok", done.text
    assert (workspace / "m.py").read_text() == "def f():\n    a\n    b\n\ndef g():\n    a\n    B\n"


def test_a_directory_listing_keeps_one_entry_per_line_under_names_a_call_can_take(workspace: Path) -> None:
    """read of a directory printed a name with a newline as two entries ("new", "line.txt") and a
    name that is not UTF-8 as "n\\udcffm.txt", which names nothing; the first is a JSON string, as
    glob prints it, the second is counted in a note."""
    (workspace / "new\nline.txt").write_text("x\n")
    (workspace / " lead.txt").write_text("x\n")
    (workspace / "plain.txt").write_text("x\n")
    (workspace / b"n\xffm.txt".decode("utf-8", "surrogateescape")).write_text("x\n")
    (workspace / "sub").mkdir()
    res = _one(workspace, "read", path=".")
    assert res.outcome == "ok"
    rows = [r for r in res.text.splitlines() if r != ".zuno/"]  # the session's own folder
    assert rows[1:5] == ['" lead.txt"', '"new\\nline.txt"', "plain.txt", "sub/"], rows
    assert res.metadata["entries"] == 5 and res.metadata["unnameable"] == 1
    assert "\\udcff" not in res.text and "1 more entry not shown: the name is not valid UTF-8" in res.text
    back = _one(workspace, "read", path=json.loads(rows[2]))
    assert back.outcome == "ok" and back.text == "1\tx"


def test_grep_of_a_binary_file_that_matched_does_not_also_say_no_files_found(workspace: Path) -> None:
    """grep of a binary file named as the path answered "No files found" above the status line
    saying that file matched; only the status line is left (no match is still "No files found")."""
    (workspace / "blob.bin").write_bytes(b"head\x00\nneedle\n")
    for profile, args in (("zuno", {"path": "blob.bin"}), ("chord", {"paths": ["blob.bin"]})):
        res = _one(workspace, "grep", profile=profile, pattern="needle", **args)
        assert res.outcome == "ok" and res.metadata["dropped"]["binaryFiles"] == 1
        assert "No files found" not in res.text and "1 binary file(s) named in the search path matched" in res.text
        assert _one(workspace, "grep", profile=profile, pattern="absent", **args).text == "No files found"

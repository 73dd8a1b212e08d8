"""A refused search is never an empty result: exact attribution of pattern vs include errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zuno import limits
from zuno.tool import Refused
from zuno.tools.search.base import check_text
from zuno.tools.search.rg_discovery import Rg, discover

from conftest import RunZuno, batch


def _one(run_zuno: RunZuno, name: str, args: dict, *extra: str) -> dict:
    return batch(run_zuno, [{"name": name, "arguments": args}], *extra)["results"][0]


def test_unparseable_regex_names_the_pattern_as_the_user_wrote_it(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.py").write_text("foo(\n")
    r = _one(run_zuno, "grep", {"pattern": "foo(", "include": "*.py"})
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
    assert "argument 'pattern'" in r["text"]
    assert '"foo("' in r["text"]  # the regex as the user wrote it
    assert "(?:" not in r["text"]  # not as rg rewrote it (it wraps every pattern in a group)
    assert "unclosed group" in r["text"]
    assert "include" not in r["text"].split("Nothing ran")[0].replace("argument 'pattern'", "")
    assert r["metadata"]["field"] == "pattern"


@pytest.mark.parametrize(
    ("pattern", "diagram"),
    [
        ("(", None),
        ("(?:(", None),
        ("ab)", None),
        ("x{2,1}", "    x{2,1}\n     ^^^^^"),
        ("[a", "    [a\n    ^"),
        ("a\n(b", None),
    ],
)
def test_a_bad_regex_is_quoted_as_the_user_wrote_it(
    workspace: Path, run_zuno: RunZuno, pattern: str, diagram: str | None
) -> None:
    (workspace / "a.txt").write_text("x\n")
    r = _one(run_zuno, "grep", {"pattern": pattern})
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
    assert f"rg cannot parse the regex {json.dumps(pattern)}" in r["text"]
    assert "(?:" + pattern not in r["text"]
    if diagram is not None:
        assert diagram in r["text"]
    assert r["metadata"]["rgError"] and "(?:" not in r["metadata"]["rgError"]


def test_bad_include_glob_is_blamed_on_the_include(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.py").write_text("foo\n")
    r = _one(run_zuno, "grep", {"pattern": "foo", "include": "*.[py"})
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
    assert r["metadata"]["field"] == "include"
    assert "argument 'include'" in r["text"] and "'*.[py'" in r["text"]
    assert "regex" not in r["text"]


def test_bad_include_with_a_bad_regex_too(workspace: Path, run_zuno: RunZuno) -> None:
    # Both broken: whichever rg reports, the blame follows what rg quoted.
    r = _one(run_zuno, "grep", {"pattern": "foo(", "include": "{a"})
    assert r["block_kind"] == "invalid_arguments"
    quoted_glob = "'{a'" in r["text"]
    assert r["metadata"]["field"] == ("include" if quoted_glob else "pattern")


def test_chord_bad_include_is_blamed_on_includes(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.go").write_text("foo\n")
    r = _one(run_zuno, "grep", {"pattern": "foo", "includes": ["*.go", "[z"]}, "--profile", "chord")
    assert r["block_kind"] == "invalid_arguments"
    assert r["metadata"]["field"] == "includes"
    assert "'[z'" in r["text"]


def test_glob_pattern_error_is_blamed_on_the_pattern(workspace: Path, run_zuno: RunZuno) -> None:
    r = _one(run_zuno, "glob", {"pattern": "**/[z"})
    assert r["block_kind"] == "invalid_arguments"
    assert r["metadata"]["field"] == "pattern"
    assert "'**/[z'" in r["text"]


def test_regex_over_the_compiled_size_limit(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.txt").write_text("x\n")
    r = _one(run_zuno, "grep", {"pattern": r"\w{500}{500}"})
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
    assert r["metadata"]["field"] == "pattern"
    assert "size limit" in r["text"] and r"\\w{500}{500}" in r["text"]


def test_missing_path_is_refused_not_empty(workspace: Path, run_zuno: RunZuno) -> None:
    for name in ("grep", "glob"):
        r = _one(run_zuno, name, {"pattern": "x", "path": "nope"})
        assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
        assert "'nope' does not exist" in r["text"]


def test_path_outside_the_workspace_is_denied(workspace: Path, run_zuno: RunZuno) -> None:
    r = _one(run_zuno, "grep", {"pattern": "root", "path": "/etc"})
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    r = _one(run_zuno, "grep", {"pattern": "x", "paths": ["..", "."]}, "--profile", "chord")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")


def test_output_over_64_mib_is_refused_with_advice(workspace: Path, run_zuno: RunZuno) -> None:
    # Each line prints as "big.txt\0N:" + 100 bytes: 700k lines is > 64 MiB of rg output.
    line = b"z" * 100 + b"\n"
    n = limits.RG_MAX_OUTPUT_BYTES // len(line) + 50_000
    (workspace / "big.txt").write_bytes(line * n)
    r = _one(run_zuno, "grep", {"pattern": "z"})
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r["text"][:300]
    assert "64 MiB" in r["text"]
    assert "Narrow the pattern, the path or the include glob" in r["text"]
    assert r["metadata"]["rgOutputBytes"] > limits.RG_MAX_OUTPUT_BYTES
    # Just under the ceiling is served (and cut to the hit cap, marked truncated).
    small = limits.RG_MAX_OUTPUT_BYTES // (len(line) + 24) - 1000  # "./big.txt\0" + "NNNNNN:" + line
    (workspace / "big.txt").write_bytes(line * small)
    r = _one(run_zuno, "grep", {"pattern": "z"})
    assert r["outcome"] == "ok"
    assert r["metadata"]["totalMatches"] == small
    assert r["metadata"]["truncated"] is True


def test_an_include_that_filters_out_everything_is_no_files_found(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "a.py").write_text("needle\n")
    r = _one(run_zuno, "grep", {"pattern": "needle", "include": "*.nothing"})
    assert (r["outcome"], r["text"]) == ("ok", "No files found"), r
    r = _one(run_zuno, "glob", {"pattern": "*.nothing"})
    assert (r["outcome"], r["text"]) == ("ok", "No files found"), r


def test_lone_surrogates_are_refused_and_empty_paths_mean_the_workspace(workspace: Path, run_zuno: RunZuno) -> None:
    # (The CLI cannot carry a lone surrogate through the store yet; the tool's own check is tested directly.)
    with pytest.raises(Refused) as e:
        check_text("pattern", "a\ud800")
    assert e.value.kind == "invalid_arguments" and "argument 'pattern'" in e.value.message
    check_text("pattern", "ok \U0001f600")
    # an empty `paths` list means what leaving it out means: the workspace
    (workspace / "a.txt").write_text("x\n")
    r = _one(run_zuno, "grep", {"pattern": "x", "paths": [], "includes": []}, "--profile", "chord")
    assert (r["outcome"], r["text"]) == ("ok", "a.txt:1:x")


def test_rg_killed_mid_walk_is_an_error_not_a_partial_result(
    workspace: Path, run_zuno: RunZuno, tmp_path: Path
) -> None:
    real = discover(None)
    assert isinstance(real, Rg)
    killer = tmp_path / "rg-then-killed"
    killer.write_text(f'#!/bin/sh\n"{real.path}" "$@"\n[ "$1" = --version ] && exit 0\nkill -9 $$\n')
    killer.chmod(0o755)
    (workspace / "a.txt").write_text("needle\n")
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"rg_path": str(killer)}})}
    r = batch(run_zuno, [{"name": "grep", "arguments": {"pattern": "needle"}}], env=env)["results"][0]
    assert r["outcome"] == "error" and "killed by signal 9" in r["text"], r
    assert "a.txt:1" not in r["text"]


def test_rg_path_diagnostics_are_read_for_the_root_they_name() -> None:
    from zuno.tools.search.rg import unreadable_roots

    err = (
        b"rg: ./secret: Permission denied (os error 13)\n"
        b"rg: a: b/c: Permission denied (os error 13)\n"
        b"rg: /gone: IO error for operation on /gone: No such file or directory (os error 2)\n"
        b"rg: x: y: IO error for operation on x: y: Not a directory (os error 20)\n"
        b"rg: No files were searched, which means ripgrep probably applied a filter you didn't expect.\n"
        b"rg: regex parse error:\n"
    )
    assert unreadable_roots(err) == {"secret", "a: b/c", "/gone", "x: y"}


def test_a_glob_with_a_dotdot_segment_is_refused_not_reported_as_no_files(workspace: Path, run_zuno: RunZuno) -> None:
    # rg matches globs against the paths it lists beneath the search path, which never hold '..':
    # before, "../**" came back "No files found", as though the parent held nothing.
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.py").write_text("foo\n")
    (workspace / "a..b.py").write_text("foo\n")
    cases = [
        ("glob", {"pattern": "../**"}, (), "pattern", "'path'"),
        ("glob", {"pattern": "sub/../*.py", "path": "."}, (), "pattern", "'path'"),
        ("grep", {"pattern": "foo", "include": "../*.py"}, (), "include", "'path'"),
        ("grep", {"pattern": "foo", "include": "!../x"}, (), "include", "'path'"),
        ("glob", {"pattern": "../**"}, ("--profile", "chord"), "pattern", "'path'"),
        ("grep", {"pattern": "foo", "includes": ["*.py", "../*"]}, ("--profile", "chord"), "includes", "'paths'"),
    ]
    for name, args, extra, field, path_field in cases:
        r = _one(run_zuno, name, args, *extra)
        assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), (args, r)
        assert r["metadata"]["field"] == field, r
        assert "has a '..' segment" in r["text"] and f"give it as {path_field}" in r["text"], r["text"]
        assert "workspace.granted_dirs" in r["text"]
    # '..' inside a name is no segment: those still search.
    r = _one(run_zuno, "glob", {"pattern": "a..b*"})
    assert (r["outcome"], r["text"].strip()) == ("ok", "a..b.py"), r

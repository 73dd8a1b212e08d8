"""Every CLI error path, end to end in real subprocesses: one line naming the file, the problem and
the fix, exit 2, nothing created, and never a traceback."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest


def _case_files(ws: Path) -> dict[str, Path]:
    not_utf8 = ws.parent / "latin1.json"
    not_utf8.write_bytes(b'{"profile": "caf\xe9"}')
    calls_not_utf8 = ws.parent / "calls-latin1.json"
    calls_not_utf8.write_bytes(b'[{"name": "read", "arguments": {"path": "caf\xe9"}}]')
    a_dir = ws.parent / "a-dir"
    a_dir.mkdir()
    not_sqlite = ws.parent / "notes.txt"
    not_sqlite.write_text("just some text, not a database\n")
    deep = ws.parent / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    loop = ws.parent / "loop.json"
    loop.symlink_to(loop)
    return {
        "not_utf8": not_utf8,
        "calls_not_utf8": calls_not_utf8,
        "dir": a_dir,
        "not_sqlite": not_sqlite,
        "deep": deep,
        "loop": loop,
    }


def _cases(ws: Path, f: dict[str, Path]) -> list[tuple[tuple[str, ...], str | bytes | None, str]]:
    """(argv, stdin, what the one line must say)."""
    missing_parent = f"/zuno-no-such-dir-{uuid.uuid4().hex[:8]}/z.db"
    return [
        # config files
        (("tools", "--config", str(f["not_utf8"])), None, "is not UTF-8 text"),
        (("tools", "--config", str(f["dir"])), None, "is a directory"),
        (("tools", "--config", "/proc/self/mem"), None, "cannot be read"),
        (("tools", "--config", str(ws / "nope.json")), None, "does not exist"),
        (("batch", "-", "--config", str(f["deep"])), "[]", "nested too deeply"),
        # batch and steps input
        (("batch", str(f["calls_not_utf8"])), None, "not UTF-8 text"),
        (("batch", "-"), b'[{"name": "read", "arguments": {"path": "\xff"}}]', "standard input: not UTF-8 text"),
        (("batch", str(f["dir"])), None, "is a directory"),
        (("batch", "/proc/self/mem"), None, "cannot be read"),
        (("batch", str(f["deep"])), None, "nested too deeply"),
        (("batch", "-"), "{not json", "not valid JSON"),
        (("batch", "-"), '{"name": "read"}', "a batch is a JSON array of calls, not an object (one call: wrap it"),
        (("steps", str(f["dir"])), None, "is a directory"),
        (("steps", str(ws / "none.jsonl")), None, "does not exist"),
        (("steps", "/proc/self/mem"), None, "cannot be read"),
        (("call", "read", "[" * 100_000), None, "ARGS_JSON: the JSON is nested too deeply"),
        (("call", "read", "{bad"), None, "ARGS_JSON: not valid JSON"),
        # the store
        (("batch", "-", "--db", str(f["dir"])), "[]", "is a directory, not a database file"),
        (("batch", "-", "--db", str(f["not_sqlite"])), "[]", "is not a SQLite database"),
        (("batch", "-", "--db", missing_parent), "[]", "does not exist"),
        (("call", "read", "{}", "--db", "/"), None, "is a directory"),
        (("sessions", "--db", missing_parent), None, "does not exist"),
        (("events", "-c", "--db", str(f["not_sqlite"])), None, "is not a SQLite database"),
        # sessions
        (("call", "read", "{}", "--session", "../../../esc"), None, "is not valid"),
        (("batch", "-", "--session", "a/b"), "[]", "is not valid"),
        (("steps", "-", "--session", "a b"), "", "is not valid"),
        (("events", "--session", "..\\x"), None, "is not valid"),
        (("batch", "-", "--new-session", "../x"), "[]", "is not valid"),
        (("call", "read", "{}", "--session", "ses_none"), None, "zuno sessions"),
        (("events", "--session", "ses_none"), None, "zuno sessions"),
        (("batch", "-", "-c"), "[]", "no session to continue in"),
        (("batch", "-", "-c"), "[]", ": leave out --continue to start one."),
        (("events", "-c"), None, ": 'zuno run' or 'zuno call' starts one."),  # events cannot start one
        (("show", "-c"), None, ": 'zuno run' or 'zuno call' starts one."),
        (("show",), None, "zuno show takes a session ID or -c (the most recent session)"),
        (("show", "ses_x", "-c"), None, "zuno show takes a session ID or -c"),
        # the rest
        (("receipt", "nope"), None, "not a verification receipt id"),
        (("receipt", "rcp_0000"), None, "no verification receipt"),
        (("tools", "--profile", "nope"), None, "unknown profile"),
        (("tools", "--root", str(f["not_sqlite"])), None, "is not a directory"),
    ]


def test_every_cli_error_path_is_one_line_exit_2_and_no_traceback(
    workspace: Path, run_zuno: Any, tmp_path: Path
) -> None:
    files = _case_files(workspace)
    (workspace / "zuno.json").unlink(missing_ok=True)
    before = set(os.listdir(tmp_path))
    for argv, stdin, message in _cases(workspace, files):
        if isinstance(stdin, bytes):
            import subprocess
            import sys

            from conftest import zuno_env

            raw = subprocess.run(
                [sys.executable, "-m", "zuno", *argv], input=stdin, capture_output=True, cwd=workspace, env=zuno_env()
            )
            out, err, code = raw.stdout.decode(), raw.stderr.decode(), raw.returncode
        else:
            proc = run_zuno(*argv, input=stdin)
            out, err, code = proc.stdout, proc.stderr, proc.returncode
        assert "Traceback" not in out + err, (argv, err)
        assert code == 2, (argv, code, err)
        assert message in err, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("zuno: "), (argv, err)
        assert out == "", (argv, out)
        assert not (workspace / ".zuno").exists(), argv  # nothing was created for an unusable input
    assert set(os.listdir(tmp_path)) == before  # nothing written next to the workspace either
    assert not [p for p in Path("/").iterdir() if p.name.startswith("zuno-no-such-dir-")]


@pytest.mark.parametrize("name", ["zuno.json"])
def test_the_roots_own_config_unreadable_or_not_utf8(workspace: Path, run_zuno: Any, name: str) -> None:
    cfg = workspace / name
    cfg.write_bytes(b"\xff\xfe{}")
    proc = run_zuno("tools")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"config {cfg} is not UTF-8 text" in proc.stderr and "Save it as UTF-8" in proc.stderr
    cfg.unlink()
    cfg.mkdir()
    proc = run_zuno("batch", "-", input="[]")
    assert proc.returncode == 2 and f"config {cfg} is a directory" in proc.stderr
    cfg.rmdir()
    cfg.symlink_to(cfg)  # a symlink loop: it exists, and cannot be read
    proc = run_zuno("tools")
    assert proc.returncode == 2 and f"config {cfg} cannot be read" in proc.stderr
    assert not (workspace / ".zuno").exists()


def test_a_steps_line_that_cannot_be_read_is_reported_and_the_rest_runs(workspace: Path, run_zuno: Any) -> None:
    (workspace / "a.txt").write_text("a\n")
    ok = json.dumps([{"name": "read", "arguments": {"path": "a.txt"}}])
    text = ok + "\n" + "[" * 100_000 + "\n" + ok + "\n"
    proc = run_zuno("steps", "-", input=text)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o.get("step") for o in out] == [1, None, 2]
    assert "nested too deeply" in out[1]["error"] and out[1]["line"] == 2


def test_a_steps_line_holding_one_call_says_to_wrap_it_and_names_its_line(workspace: Path, run_zuno: Any) -> None:
    (workspace / "a.txt").write_text("a\n")
    one = json.dumps({"name": "read", "arguments": {"path": "a.txt"}})
    proc = run_zuno("steps", "-", input=one + "\n5\n[" + one + "]\n")
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 1 and [o.get("step") for o in out] == [None, None, 1]
    wrap = "line 1: a step is a JSON array of calls, not an object (one call: wrap it in [ ]). Not run."
    assert out[0]["error"] == wrap
    assert out[1]["error"] == "line 2: a step is a JSON array of calls, not a number. Not run."

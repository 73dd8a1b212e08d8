"""What can never be exec'd is refused before anything runs, naming the argument at fault: a NUL byte
in a shell command or a search pattern / include / path, and a command or pattern too long for
execve (E2BIG). A command the guard failed to start is "not run", never "uncertain"."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.process import CommandSpec, start
from zuno.process.environment import withheld_environment
from zuno.process.execve import MAX_ARG_STRLEN, arg_space, exec_problem

BIG = 3 * 1024 * 1024  # 3 MiB: over one execve string (128 KiB) and over the whole space (2 MiB here)


async def _one(root: Path, name: str, arguments: dict[str, Any], **rt: Any) -> Any:
    async with zuno.Runtime(root=root, **rt) as runtime, runtime.session() as s:
        return (await s.step([{"name": name, "arguments": arguments}])).results[0]


def _refused(rec: Any, field: str, *words: str) -> None:
    assert (rec.outcome, str(rec.block_kind)) == ("blocked", "invalid_arguments"), rec.text
    assert f"argument '{field}'" in rec.text, rec.text
    assert rec.metadata.get("field") == field, rec.metadata
    for w in words:
        assert w in rec.text, rec.text
    assert "failed inside the tool" not in rec.text
    assert len(rec.text) < 2_000  # a huge value is never echoed back whole


@pytest.mark.parametrize("background", [False, True])
async def test_a_nul_byte_in_a_shell_command_is_refused_and_nothing_runs(workspace: Path, background: bool) -> None:
    rec = await _one(workspace, "shell", {"command": "touch ran; echo a\0b", "run_in_background": background})
    _refused(rec, "command", "NUL byte", "at character 17")
    assert not (workspace / "ran").exists()
    assert not (workspace / ".zuno" / "logs").exists() or not any((workspace / ".zuno" / "logs").rglob("*.log"))


@pytest.mark.parametrize("background", [False, True])
async def test_a_3_mib_shell_command_is_refused_as_too_long_for_execve(workspace: Path, background: bool) -> None:
    rec = await _one(workspace, "shell", {"command": "touch ran; : " + "x" * BIG, "run_in_background": background})
    _refused(rec, "command", "E2BIG", f"{MAX_ARG_STRLEN - 1:,} bytes")
    assert not (workspace / "ran").exists()


async def test_a_nul_byte_in_the_shell_workdir_is_refused(workspace: Path) -> None:
    _refused(await _one(workspace, "shell", {"command": "true", "workdir": "a\0b"}), "workdir", "NUL byte")


async def test_the_largest_command_execve_takes_still_runs(workspace: Path) -> None:
    """The check is the kernel's rule, not a guess: a command just under one string's limit runs."""
    filler = MAX_ARG_STRLEN - 1 - len("set -o pipefail\n: ") - 64
    rec = await _one(workspace, "shell", {"command": ": " + "x" * filler + "\necho fits"})
    assert rec.outcome == "ok", rec.text[:500]
    assert "fits" in rec.text


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("grep", {"pattern": "a\0b"}, "pattern"),
        ("grep", {"pattern": "a", "include": "*.t\0xt"}, "include"),
        ("grep", {"pattern": "a", "path": "a\0.txt"}, "path"),
        ("glob", {"pattern": "*.t\0xt"}, "pattern"),
        ("glob", {"pattern": "*", "path": "sub\0dir"}, "path"),
    ],
)
async def test_a_nul_byte_in_a_search_argument_is_refused(
    workspace: Path, name: str, arguments: dict[str, Any], field: str
) -> None:
    (workspace / "a.txt").write_text("a\n")
    rec = await _one(workspace, name, arguments)
    _refused(rec, field, "NUL byte", "\\u0000")


async def test_a_nul_byte_in_a_chord_include_is_blamed_on_includes(workspace: Path) -> None:
    rec = await _one(workspace, "grep", {"pattern": "a", "includes": ["*.py", "*\0"]}, profile="chord")
    _refused(rec, "includes", "NUL byte")


@pytest.mark.parametrize("name", ["grep", "glob"])
async def test_a_3_mib_search_pattern_is_refused_as_too_long_for_execve(workspace: Path, name: str) -> None:
    (workspace / "a.txt").write_text("a\n")
    rec = await _one(workspace, name, {"pattern": "x" * BIG})
    _refused(rec, "pattern", "E2BIG", f"{BIG:,} bytes")


async def test_many_includes_together_too_long_are_blamed_on_includes(workspace: Path) -> None:
    """Each include fits one execve string; together they are over the whole space."""
    n = arg_space() // 100_000 + 2
    includes = [f"*{i:03d}" + "y" * 100_000 for i in range(n)]
    rec = await _one(workspace, "grep", {"pattern": "a", "includes": includes}, profile="chord")
    _refused(rec, "includes", "E2BIG", "together")


async def test_the_process_layer_never_starts_what_execve_would_reject(tmp_path: Path) -> None:
    env = withheld_environment()
    for argv, env_, words in (
        (["bash", "-c", "echo a\0b"], env, "NUL byte"),
        (["bash", "-c", "x" * BIG], env, "E2BIG"),
        (["true"], {**env, "BAD": "a\0b"}, "environment variable BAD"),
    ):
        r = await start(CommandSpec(argv, tmp_path, env_, tmp_path / "logs", label="t"))
        assert r.exit is not None and r.exit.returncode == 125 and r.exit.never_started, r.exit
        assert r.exit.guard_diagnostic and words in r.exit.guard_diagnostic
        assert "the command did not run" in r.exit.guard_diagnostic
    assert exec_problem(["true"], env) is None


async def test_a_direct_guard_that_cannot_be_started_reports_nothing_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zuno.process as zp

    monkeypatch.setattr(zp, "USE_GUARD_SERVER", False)
    r = await start(CommandSpec(["true"], tmp_path / "no-such-dir", withheld_environment(), tmp_path / "l"))
    assert r.exit and r.exit.returncode == 125 and r.exit.never_started
    assert "the command did not run" in (r.exit.guard_diagnostic or "")


def _busy_interpreter(tmp_path: Path) -> tuple[Path, int]:
    """A `bash` on PATH that is open for writing: execve fails with ETXTBSY after the guard started."""
    bindir = tmp_path / "busy-bin"
    bindir.mkdir()
    fake = bindir / "bash"
    fake.write_text("#!/bin/sh\ntouch ran\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir, os.open(fake, os.O_WRONLY)


async def test_a_command_the_guard_could_not_exec_is_not_run_not_uncertain(workspace: Path, tmp_path: Path) -> None:
    bindir, fd = _busy_interpreter(tmp_path)
    try:
        path = f"{bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
        rec = await _one(
            workspace, "shell", {"command": "touch ran"}, config_overrides={"shell": {"env": {"PATH": path}}}
        )
    finally:
        os.close(fd)
    assert rec.outcome == "error", rec.text
    assert rec.text.startswith("[not run: the guard reports exit 125"), rec.text
    assert "Nothing ran." in rec.text and "uncertain" not in rec.text.lower()
    assert "Text file busy" in rec.text and "the command did not run" in rec.text
    r = rec.metadata["receipt"]
    assert r["decision"] == "nothing" and r["authority"] == "unknown"
    assert "nothing ran" in r["notProven"][0]
    assert not (workspace / "ran").exists()


async def test_an_environment_value_that_cannot_be_passed_is_refused_naming_it(workspace: Path) -> None:
    rec = await _one(
        workspace, "shell", {"command": "touch ran"}, config_overrides={"shell": {"env": {"BAD_VALUE": "a\0b"}}}
    )
    assert (rec.outcome, str(rec.block_kind)) == ("blocked", "invalid_arguments"), rec.text
    assert "environment variable BAD_VALUE contains a NUL byte" in rec.text and "shell.env" in rec.text
    assert not (workspace / "ran").exists()

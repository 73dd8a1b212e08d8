"""Outside tests of the session/state CLI (fifteenth round): option values and paths a user can
mistype get a clear usage error (exit 2, no traceback) that names the option and the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import zuno_cli


@pytest.mark.parametrize("value", ["٣", "３", "²"])
def test_prune_keep_refuses_non_ascii_digits(tmp_path: Path, value: str) -> None:
    proc = zuno_cli(tmp_path, "sessions", "prune", "--keep", value, "--dry-run")
    assert proc.returncode == 2, proc
    assert "--keep" in proc.stderr and "ASCII digits" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "would prune" not in proc.stdout


def test_prune_older_than_refuses_non_ascii_digits(tmp_path: Path) -> None:
    proc = zuno_cli(tmp_path, "sessions", "prune", "--older-than", "٣d", "--dry-run")
    assert proc.returncode == 2, proc
    assert "--older-than" in proc.stderr and "Traceback" not in proc.stderr


def test_prune_keep_ascii_still_works(tmp_path: Path) -> None:
    proc = zuno_cli(tmp_path, "sessions", "prune", "--keep", "3", "--dry-run")
    assert proc.returncode == 0, proc


def _bad_paths(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "afile").write_text("hi\n")
    (tmp_path / "notdb").write_text("not sqlite at all, just text\n")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    return {name: tmp_path / name for name in ("afile", "notdb", "adir", "fifo")}


@pytest.mark.parametrize(("command", "root"), [("plan", "afile"), ("todo", "missing")])
def test_state_commands_refuse_a_root_that_is_not_a_directory(tmp_path: Path, command: str, root: str) -> None:
    _bad_paths(tmp_path)
    proc = zuno_cli(tmp_path / root, command)
    assert proc.returncode == 2, proc
    assert "is not a directory" in proc.stderr and "--root" in proc.stderr, proc.stderr
    assert "no store yet" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("db", "says"),
    [("adir", "is a directory"), ("fifo", "is not a regular file"), ("notdb", "is not a SQLite database")],
)
def test_unusable_db_is_named_with_the_fix(tmp_path: Path, db: str, says: str) -> None:
    paths = _bad_paths(tmp_path)
    # zuno_cli has a subprocess timeout: a FIFO opened for reading would hang here, not pass.
    proc = zuno_cli(tmp_path, "plan", "--db", str(paths[db]))
    assert proc.returncode == 2, proc
    assert str(paths[db]) in proc.stderr and says in proc.stderr and "--db" in proc.stderr, proc.stderr
    assert "no store yet" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("op", "bad"), [("accept", "mp_٣"), ("reject", "x'; DROP"), ("reject", "mp_1\x1b[31m"), ("accept", "a" * 300)]
)
def test_memory_decision_refuses_a_malformed_id(tmp_path: Path, op: str, bad: str) -> None:
    proc = zuno_cli(tmp_path, "memory", op, bad, "--json")
    assert proc.returncode == 2, proc  # a usage error, not "no such proposal" (1)
    assert "is not a proposal id" in proc.stderr and "zuno memory" in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stderr and len(proc.stderr) < 400 and "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / ".zuno" / "zuno.db").exists()  # refused before the store is opened

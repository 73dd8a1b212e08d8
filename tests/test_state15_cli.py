"""Outside tests of the session/state CLI (fifteenth round): option values and paths a user can
mistype get a clear usage error (exit 2, no traceback) that names the option and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import zuno_cli


@pytest.mark.parametrize("value", ["٣", "３", "²", "3x"])
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

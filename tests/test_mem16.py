"""Memory and goal (sixteenth round), outside findings: a refusal that leaves no store behind, the
memory tools' answers to a malformed proposal id, a memory_update that changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import zuno_cli


@pytest.mark.parametrize(("op", "json_out"), [("accept", False), ("reject", True)])
def test_deciding_a_proposal_with_no_store_refuses_and_creates_nothing(
    tmp_path: Path, op: str, json_out: bool
) -> None:
    proc = zuno_cli(tmp_path, "memory", op, "mp_nonesuch", *(["--json"] if json_out else []))
    assert proc.returncode == 1, proc  # well-formed but not pending: 1, as with a store (docs/cli.md)
    assert "there is no memory proposal mp_nonesuch" in proc.stderr and "zuno memory" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    if json_out:
        assert json.loads(proc.stdout)["refusal"]["kind"] == "NotPending"
    assert list(tmp_path.iterdir()) == []  # no .zuno/, no database


def test_deciding_with_a_named_store_that_does_not_exist_creates_none(tmp_path: Path) -> None:
    db = tmp_path / "named.db"
    proc = zuno_cli(tmp_path, "memory", "reject", "mp_nonesuch", "--db", str(db))
    assert proc.returncode == 1 and "there is no memory proposal" in proc.stderr, proc
    assert not db.exists() and not (tmp_path / ".zuno").exists()

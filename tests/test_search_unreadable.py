"""Unreadable directories, walked without root: rg runs as `nobody` (setpriv), the CLI as usual.

Root reads everything, so a chmod alone proves nothing here. The rg the tools use is a copy of the
real rg started through `setpriv --reuid=nobody`, configured with search.rg_path: the walk really
runs without privileges, through the real dispatcher and CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from zuno.tools.search.rg_discovery import Rg, discover

from conftest import RunZuno, batch

SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None, reason="needs root and setpriv to drop to nobody")


@pytest.fixture
def unprivileged(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A workspace nobody can read (except `secret/` and `secret.txt`), and a config whose rg runs as nobody."""
    base = Path(tempfile.mkdtemp(prefix="zuno-nobody-", dir="/tmp"))
    try:
        base.chmod(0o755)
        rg = discover(None)
        assert isinstance(rg, Rg), rg
        shutil.copy2(rg.path, base / "rg")
        (base / "rg").chmod(0o755)
        wrapper = base / "rg-as-nobody"
        wrapper.write_text(
            f'#!/bin/sh\nexec {SETPRIV} --reuid=nobody --regid=nogroup --clear-groups {base / "rg"} "$@"\n'
        )
        wrapper.chmod(0o755)
        ws = base / "ws"
        (ws / "open" / "deep").mkdir(parents=True)
        (ws / "open" / "deep" / "a.txt").write_text("needle\n")
        (ws / "secret").mkdir()
        (ws / "secret" / "s.txt").write_text("needle\n")
        (ws / "secret.txt").write_text("needle\n")
        for d, _, files in os.walk(ws):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        (ws / "secret").chmod(0o700)
        (ws / "secret.txt").chmod(0o600)
        assert stat.S_IMODE((ws / "secret").stat().st_mode) == 0o700
        yield ws, {"ZUNO_CONFIG_CONTENT": json.dumps({"search": {"rg_path": str(wrapper)}})}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(run_zuno: RunZuno, ws: Path, env: dict[str, str], calls: list[dict], *extra: str) -> list[dict]:
    return batch(run_zuno, calls, "--root", str(ws), *extra, env=env)["results"]


def test_unreadable_directory_elsewhere_is_not_a_failure(unprivileged, run_zuno: RunZuno) -> None:
    ws, env = unprivileged
    found, nothing, files, no_files = _run(
        run_zuno,
        ws,
        env,
        [
            {"name": "grep", "arguments": {"pattern": "needle"}},
            {"name": "grep", "arguments": {"pattern": "absent-pattern"}},
            {"name": "glob", "arguments": {"pattern": "*.txt"}},
            {"name": "glob", "arguments": {"pattern": "*.nothing"}},
        ],
    )
    # the walk really ran as nobody: secret/ and secret.txt contributed nothing
    assert found["outcome"] == "ok" and found["text"] == "open/deep/a.txt:1:needle"
    assert nothing["outcome"] == "ok" and nothing["text"] == "No files found"
    assert files["outcome"] == "ok" and files["metadata"]["paths"] == ["open/deep/a.txt", "secret.txt"]
    assert no_files["outcome"] == "ok" and no_files["text"] == "No files found"
    assert "Permission denied" not in json.dumps([found, nothing, files, no_files])


def test_a_search_restricted_to_one_unreadable_path_is_refused(unprivileged, run_zuno: RunZuno) -> None:
    ws, env = unprivileged
    results = _run(
        run_zuno,
        ws,
        env,
        [
            {"name": "grep", "arguments": {"pattern": "needle", "path": "secret"}},
            {"name": "grep", "arguments": {"pattern": "needle", "path": "secret.txt"}},
            {"name": "glob", "arguments": {"pattern": "*", "path": "secret"}},
        ],
    )
    for r in results:
        assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r
        assert "could not be read" in r["text"] and "not a 'no matches' answer" in r["text"]
    chord = _run(
        run_zuno,
        ws,
        env,
        [{"name": "grep", "arguments": {"pattern": "needle", "paths": ["secret"]}}],
        "--profile",
        "chord",
    )[0]
    assert chord["block_kind"] == "invalid_arguments"
    # one unreadable root among readable ones is not a refusal
    mixed = _run(
        run_zuno,
        ws,
        env,
        [{"name": "grep", "arguments": {"pattern": "needle", "paths": ["secret", "open"]}}],
        "--profile",
        "chord",
    )[0]
    assert mixed["outcome"] == "ok" and mixed["text"] == "open/deep/a.txt:1:needle"

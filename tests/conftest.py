"""Shared fixtures: a fresh workspace per test, and a way to drive the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def zuno_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ZUNO")}
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["ZUNO_CONFIG_DIR"] = str(Path(env.get("TMPDIR", "/tmp")) / "zuno-test-no-user-config")
    if extra:
        env.update(extra)
    return env


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in list(os.environ):
        if k.upper().startswith("ZUNO"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("ZUNO_CONFIG_DIR", str(tmp_path / "user-config"))


RunZuno = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_zuno(workspace: Path) -> RunZuno:
    """Run the real `zuno` CLI (python -m zuno) in the workspace."""

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "zuno", *args],
            input=input,
            capture_output=True,
            text=True,
            cwd=cwd or workspace,
            env=zuno_env(env),
            timeout=timeout,
        )

    return run


def batch(run: RunZuno, calls: list[dict[str, Any]], *args: str, **kw: Any) -> dict[str, Any]:
    """Run calls as one step through `zuno batch` and return the parsed JSON, asserting the exit
    status: 0 when every outcome was ok, 1 when one was not (docs/cli.md)."""
    proc = run("batch", "-", *args, input=json.dumps(calls), **kw)
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    all_ok = all(r["outcome"] == "ok" for r in out["results"])
    assert proc.returncode == (0 if all_ok else 1), (proc.returncode, [r["outcome"] for r in out["results"]])
    return out

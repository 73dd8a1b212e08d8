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


def pytest_sessionstart(session: pytest.Session) -> None:
    # The suite starts Zuno in hundreds of subprocesses. Under PYTHONDONTWRITEBYTECODE (set in some
    # environments) none of them writes its bytecode, so every one would compile all of Zuno's
    # sources again (~0.2 s of CPU each): compile them once here; reading .pyc files is not turned
    # off by that variable. Up-to-date files are only stat()ed.
    import compileall

    for tree in (SRC, Path(__file__).resolve().parent):
        compileall.compile_dir(tree, quiet=2, workers=1)
    _sigint_not_ignored()


def _sigint_not_ignored() -> None:
    """A suite started as a background job of a non-interactive shell inherits SIGINT ignored, and
    so would every Zuno it starts (an ignored signal stays ignored across exec): the tests that
    interrupt Zuno with SIGINT would wait forever. Caught here (a handler is reset to the default
    at exec), every child starts with SIGINT as a terminal gives it."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


def zuno_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `zuno` CLI on ``root`` (its --root), no input, NO_COLOR set."""
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        input="",
        capture_output=True,
        text=True,
        env=zuno_env({"NO_COLOR": "1"}),
        timeout=90,
    )


def batch(run: RunZuno, calls: list[dict[str, Any]], *args: str, **kw: Any) -> dict[str, Any]:
    """Run calls as one step through `zuno batch` and return the parsed JSON, asserting the exit
    status: 0 when every outcome was ok, 1 when one was not (docs/cli.md)."""
    proc = run("batch", "-", *args, input=json.dumps(calls), **kw)
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    all_ok = all(r["outcome"] == "ok" for r in out["results"])
    assert proc.returncode == (0 if all_ok else 1), (proc.returncode, [r["outcome"] for r in out["results"]])
    return out


# Interpreters beyond bash that some tests run commands under. scripts/test installs the missing
# ones with apt-get (and says so); the run ends with a line per interpreter naming the tests that
# need it, so a machine without one knows what failed for that reason.
EXTRA_INTERPRETERS = ("zsh", "ksh", "dash", "pwsh")
_NEEDS_INTERPRETER: dict[str, list[str]] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "interpreter(name): the test runs commands under this shell (scripts/test installs zsh, ksh, dash)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        for name in {p for p in params if isinstance(p, str) and p in EXTRA_INTERPRETERS}:
            item.add_marker(pytest.mark.interpreter(name))
        for mark in item.iter_markers("interpreter"):
            _NEEDS_INTERPRETER.setdefault(str(mark.args[0]), []).append(item.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under pytest-xdist each worker collects the tests; it hands what it found to the controller,
    # which prints the section (pytest_testnodedown below).
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["needs_interpreter"] = _NEEDS_INTERPRETER


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    for name, ids in getattr(node, "workeroutput", {}).get("needs_interpreter", {}).items():
        known = _NEEDS_INTERPRETER.setdefault(name, [])
        known.extend(i for i in ids if i not in known)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    import shutil

    needs = _NEEDS_INTERPRETER
    if not needs:
        return
    terminalreporter.section("interpreters these tests need")
    for name, ids in sorted(needs.items()):
        where = shutil.which(name)
        state = f"installed at {where}" if where else "NOT installed (scripts/test installs zsh, ksh and dash)"
        files = sorted({i.split("::")[0] for i in ids})
        terminalreporter.write_line(f"{name}: {len(ids)} tests in {', '.join(files)}; {state}")


@pytest.fixture
async def chord(workspace: Path) -> Any:
    """A one-call-per-step client (tests/stepclient.py) in a session of the chord profile."""
    from stepclient import step_client

    async for c in step_client(workspace, "chord"):
        yield c


@pytest.fixture
async def patcher(workspace: Path) -> Any:
    """The same in a session of the zuno profile (apply_patch)."""
    from stepclient import step_client

    async for c in step_client(workspace, "zuno"):
        yield c

"""How rg is started: its environment follows this process's, the quick execve bound never lets
through what the exact check refuses, and a search leaves no thread, descriptor or child behind."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
from pathlib import Path

import pytest

import zuno
from zuno.process.execve import MAX_ARG_STRLEN, exec_problem
from zuno.tools.search.base import _surely_fits
from zuno.tools.search.rg import _kill_group, spawn
from zuno.tools.search.rg_discovery import rg_env


def test_rg_env_follows_changes_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    first = rg_env()
    assert "ZUNO_SEARCH_SPAWN_TEST" not in first and "SEARCH_SPAWN_TEST" not in first
    monkeypatch.setenv("SEARCH_SPAWN_TEST", "one")
    monkeypatch.setenv("ZUNO_SEARCH_SPAWN_TEST", "secret")
    env = rg_env()
    assert env["SEARCH_SPAWN_TEST"] == "one" and "ZUNO_SEARCH_SPAWN_TEST" not in env
    env["SEARCH_SPAWN_TEST"] = "changed by a caller"  # a copy: the next call is not affected
    assert rg_env()["SEARCH_SPAWN_TEST"] == "one"
    monkeypatch.setenv("SEARCH_SPAWN_TEST", "two")
    assert rg_env()["SEARCH_SPAWN_TEST"] == "two"
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", "/nonexistent/rgrc")
    assert "RIPGREP_CONFIG_PATH" not in rg_env()
    monkeypatch.delenv("SEARCH_SPAWN_TEST")
    assert "SEARCH_SPAWN_TEST" not in rg_env()


def test_the_quick_bound_never_passes_what_execve_refuses() -> None:
    rnd = random.Random(15)
    env = rg_env()
    alphabet = ["a", "é", "€", "😀"]  # 1 to 4 bytes in UTF-8
    passed = 0
    for _ in range(400):
        n = rnd.choice([10, 1000, 8000, 20_000, 30_000, 40_000, MAX_ARG_STRLEN // 4, MAX_ARG_STRLEN])
        argv = ["rg", "--regexp", rnd.choice(alphabet) * rnd.randint(0, n), "--", "."]
        if _surely_fits(argv, env):
            passed += 1
            assert exec_problem(argv, env) is None, len(argv[2])
    assert passed > 50  # the bound does take the common case


async def test_a_search_leaves_no_thread_descriptor_or_child(workspace: Path) -> None:
    for i in range(30):
        (workspace / f"f{i}.txt").write_text(f"needle {i}\n")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await s.step([{"name": "grep", "arguments": {"pattern": "needle"}}])  # discovery, store opened
        threads = threading.active_count()
        fds = set(os.listdir("/proc/self/fd"))
        before = _children()  # a test worker may hold children of earlier tests (a guard fork-server)
        for _ in range(5):
            res = await s.step(
                [{"name": "grep", "arguments": {"pattern": "needle"}}, {"name": "glob", "arguments": {"pattern": "*"}}]
            )
            assert [r.outcome for r in res.results] == ["ok", "ok"]
            assert res.results[0].metadata["totalMatches"] == 30 and res.results[1].metadata["total"] == 30
            assert threading.active_count() == threads
        assert set(os.listdir("/proc/self/fd")) == fds
        assert _children() <= before  # every rg started was waited for


def _children() -> set[str]:
    return set(Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split())


def test_rg_starts_in_a_process_group_of_its_own_within_this_session(tmp_path: Path) -> None:
    """rg is killed by its group on a cancellation, so it needs a group of its own; a session of
    its own would also put it in a scheduler autogroup of its own, which cost rg ~20% (benchmarks.md)."""
    proc = spawn("/bin/sleep", ["30"], str(tmp_path), subprocess.DEVNULL, subprocess.DEVNULL)
    try:
        assert os.getpgid(proc.pid) == proc.pid  # its own group: killpg(pid) reaches it and only it
        assert os.getsid(proc.pid) == os.getsid(0)  # this process's session, not a new one
        if os.path.exists("/proc/self/autogroup"):  # a kernel with autogroup scheduling
            # The file is empty for a task whose cgroup is not the root one (a CI container):
            # autogroups do not apply there, and both read empty.
            with open(f"/proc/{proc.pid}/autogroup") as f:
                theirs = f.read().split()[:1]
            with open("/proc/self/autogroup") as f:
                ours = f.read().split()[:1]
            assert theirs == ours
        _kill_group(proc)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

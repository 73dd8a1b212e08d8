"""glob and grep against a directory swapped with a symlink to outside the workspace while they run
(the attack the file tools withstand, tests/test_safe_paths.py). rg walks by path and would follow
a symlink swapped in under a path it has checked; it runs confined by the kernel
(``tools/search/confine.py``), so whatever the link points at cannot be opened. Each test runs under
each way of confining rg this machine has: a view of its own (a mount namespace, ``mountview.py``)
and a Landlock domain."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import zuno
from test_safe_paths import Swapper
from zuno.tools.search import confine
from zuno.tools.search.rg import run_rg
from zuno.tools.search.rg_discovery import Rg, discover

SECRET = "ZUNO_OUTSIDE_SECRET_4417"
needs_landlock = pytest.mark.skipif(
    confine.landlock_abi() == 0, reason="this kernel has no Landlock: rg runs unconfined"
)
# What an outside path is to rg under each: absent from its view, or refused by the domain.
OUTSIDE_ERROR = {confine.VIEW: b"No such file or directory", confine.LANDLOCK: b"Permission denied"}


@pytest.fixture(params=confine.KINDS)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """One way of confining rg, the only one searches may use for this test (skipped where this
    machine cannot confine rg so)."""
    k: str = request.param
    rg = discover(None)
    assert isinstance(rg, Rg)
    probe = confine.Confinement([tmp_path], rg.path, kinds=(k,))
    if not probe.confined:
        pytest.skip(f"rg cannot be confined by {k} here: {probe.problem}")
    monkeypatch.setattr(confine, "KINDS", (k,))
    monkeypatch.setattr(confine, "_cache", {})
    return k


async def test_a_swapped_in_symlink_never_lets_a_search_read_outside(workspace: Path, kind: str) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "seed.txt").write_text("seed\n")
    os.symlink(outside, workspace / "l")
    swapper = Swapper(workspace / "d", workspace / "l")
    swapper.start()
    leaked: list[str] = []
    found_seed = 0
    try:
        async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
            # ~4% of these calls leaked before rg was confined. "d" is the root swapped itself; "."
            # walks into "d", a directory below the root swapped while rg walks.
            for i in range(400):
                path = "d" if i % 4 < 2 else "."
                call = (
                    {"name": "grep", "arguments": {"pattern": f"{SECRET}|seed", "path": path}}
                    if i % 2
                    else {"name": "glob", "arguments": {"pattern": "**/*.txt", "path": path}}
                )
                rec = (await s.step([call])).results[0]
                if SECRET in rec.text or "secret.txt" in rec.text:
                    leaked.append(rec.text)
                if str(rec.outcome) == "ok":
                    found_seed += "seed" in rec.text
                    assert rec.metadata["rg"]["confined"] is True
                    assert rec.metadata["rg"]["confinement"] == kind
    finally:
        swapper.stop.set()
        swapper.join(10)
    assert swapper.swaps > 100, "the swapper barely ran; the race did not happen"
    assert leaked == [], f"a search read outside the workspace: {leaked[0][:200]}"
    assert found_seed > 0, "no search ever found what is inside: the race test tested nothing"


async def test_confined_rg_cannot_open_a_path_outside_even_when_named(workspace: Path, kind: str) -> None:
    """The confinement itself, without a race: rg given an absolute path outside the roots finds
    nothing there (absent from its view, or refused by the kernel); the same rg reads inside."""
    outside = workspace.parent / "elsewhere"
    outside.mkdir()
    (outside / "s.txt").write_text(SECRET + "\n")
    (workspace / "in.txt").write_text(SECRET + "\n")
    rg = discover(None)
    assert isinstance(rg, Rg)
    c = confine.confinement_for([workspace], rg.path)
    assert c is not None and c.confined
    for target, readable in ((outside / "s.txt", False), (workspace / "in.txt", True)):
        got = bytearray()
        res = await run_rg(rg, ["--no-config", SECRET, str(target)], str(workspace), got.extend, confinement=c)
        assert res.confined and res.confinement == kind
        assert (SECRET.encode() in got) is readable, (target, bytes(got), res.stderr)
        if not readable:
            assert OUTSIDE_ERROR[kind] in res.stderr


def test_the_ignore_files_above_the_root_still_apply(tmp_path: Path, kind: str) -> None:
    """What rg reads outside the roots to apply its ignore rules stays readable in the domain: a
    repository's .gitignore and an .ignore above the workspace still hide what they name."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("by-gitignore.txt\n")
    (repo / ".ignore").write_text("by-ignore.txt\n")
    ws = repo / "ws"
    ws.mkdir()
    for name in ("kept.txt", "by-gitignore.txt", "by-ignore.txt"):
        (ws / name).write_text("x\n")

    async def grep() -> str:
        async with zuno.Runtime(root=ws) as rt, rt.session() as s:
            rec = (await s.step([{"name": "grep", "arguments": {"pattern": "x"}}])).results[0]
            assert rec.metadata["rg"]["confined"] is True
            return rec.text

    text = asyncio.run(grep())
    assert "kept.txt" in text
    assert "by-gitignore.txt" not in text and "by-ignore.txt" not in text


def test_readable_files_are_the_ignore_files_above_and_the_global_git_ones(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n  name = x\n[core]\n  excludesFile = ~/my-ignores\n")
    (home / "my-ignores").write_text("*.log\n")
    (home / ".config" / "git" / "ignore").write_text("*.tmp\n")
    top = tmp_path / "top"
    (top / "ws").mkdir(parents=True)
    (top / ".gitignore").write_text("a\n")
    (top / ".rgignore").write_text("b\n")
    got = confine.readable_files([top / "ws"], {"HOME": str(home)})
    assert set(got) >= {
        top / ".gitignore",
        top / ".rgignore",
        home / ".gitconfig",
        home / "my-ignores",
        home / ".config" / "git" / "ignore",
    }
    assert all(p.is_file() for p in got)
    assert top / ".ignore" not in got  # only what exists


@needs_landlock
async def test_an_rg_that_cannot_start_confined_runs_unconfined_and_says_so(workspace: Path, tmp_path: Path) -> None:
    """A wrapper script (its interpreter is outside the domain) fails the domain's probe: that rg
    runs as before, unconfined, and its facts say so, rather than not running at all."""
    real = discover(None)
    assert isinstance(real, Rg)
    wrapper = tmp_path / "bin" / "rg-wrapper"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{real.path}" "$@"\n')
    wrapper.chmod(0o755)
    assert confine.confinement_for([workspace], str(wrapper)) is None
    (workspace / "a.txt").write_text("needle\n")
    cfg = {"search": {"rg_path": str(wrapper)}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        rec = (await s.step([{"name": "grep", "arguments": {"pattern": "needle"}}])).results[0]
    assert str(rec.outcome) == "ok" and "a.txt" in rec.text
    assert rec.metadata["rg"]["confined"] is False


async def test_search_confine_false_runs_rg_unconfined(workspace: Path) -> None:
    (workspace / "a.txt").write_text("needle\n")
    async with zuno.Runtime(root=workspace, config_overrides={"search": {"confine": False}}) as rt, rt.session() as s:
        rec = (await s.step([{"name": "grep", "arguments": {"pattern": "needle"}}])).results[0]
    assert str(rec.outcome) == "ok" and "a.txt" in rec.text
    assert rec.metadata["rg"]["confined"] is False


async def test_a_spawner_that_ended_idle_is_started_again_and_no_start_is_lost(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A spawner thread ends after a while without work; the next search starts another with the
    same rules. Starts that race the end (an idle time of a millisecond, starts spaced around it)
    are each run by some thread: none waits forever."""
    monkeypatch.setattr(confine, "SPAWNER_IDLE_S", 0.001)
    (workspace / "a.txt").write_text(SECRET + "\n")
    rg = discover(None)
    assert isinstance(rg, Rg)
    c = confine.confinement_for([workspace], rg.path)
    assert c is not None
    threads = set()
    for i in range(60):
        got = bytearray()
        res = await asyncio.wait_for(
            run_rg(rg, ["--no-config", SECRET, "a.txt"], str(workspace), got.extend, confinement=c), 30
        )
        assert res.returncode == 0 and SECRET.encode() in got
        threads.add(id(c._spawner))
        await asyncio.sleep(0.0005 * (i % 4))
    assert len(threads) > 1, "the spawner never ended idle: the restart was not exercised"


async def test_a_start_cancelled_half_way_waits_for_it_and_discards_that_process(workspace: Path, kind: str) -> None:
    """The thread uses the pipe ends until rg runs, so a start is never cancelled half-way: the
    cancellation waits for it, hands the process it started to ``discard``, then goes on."""
    import subprocess
    import time

    rg = discover(None)
    assert isinstance(rg, Rg)
    c = confine.confinement_for([workspace], rg.path)
    assert c is not None
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_spawn(stdin: int) -> subprocess.Popen[bytes]:
        loop.call_soon_threadsafe(entered.set)
        time.sleep(0.3)  # the start is under way when the call is cancelled
        return subprocess.Popen([rg.path, "--version"], stdin=stdin, stdout=subprocess.PIPE)

    discarded: list[subprocess.Popen[bytes]] = []

    async def discard(proc: subprocess.Popen[bytes]) -> None:
        proc.communicate()
        discarded.append(proc)

    task = asyncio.ensure_future(c.start_whole(slow_spawn, discard))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(discarded) == 1 and discarded[0].returncode == 0  # started, handed over, reaped

"""What was cut from a search call's fixed cost says and refuses exactly what the longer way did:
glob's subject read directly, one stat per search path, the environment's execve size cached,
rg's pipe widened once rg runs, glob's single directory given to rg as no path at all, and glob's
paths displayed, split and listed from one joined text."""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import threading
from pathlib import Path

import pytest

import zuno
import zuno.tools.search.rg as rgmod
from zuno.tool import Tool
from zuno.tools.search import base
from zuno.tools.search.base import Plan
from zuno.tools.search.glob import GlobArgs, GlobTool
from zuno.tools.search.glob_collect import GlobCollector, glob_lines, glob_listing
from zuno.tools.search.rg_discovery import Rg, rg_env, shared_rg_env

_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


@pytest.mark.parametrize("path", [None, ".", "src", "/abs/elsewhere"])
def test_globs_subject_is_what_the_general_search_finds(path: str | None) -> None:
    args = GlobArgs(pattern="*.py", path=path)
    assert GlobTool().subject(args) == Tool.subject(GlobTool(), args)


@pytest.mark.parametrize(("prefix", "strip_dot"), [("", True), ("sub/", True), ("sub/", False), ("", False)])
@pytest.mark.parametrize("seed", range(60))
def test_display_joined_is_display_all_joined(prefix: str, strip_dot: bool, seed: int) -> None:
    rnd = random.Random(seed)
    rels = [rnd.choice(["./", "././", "", "a/./"]) + rnd.choice(["x", "./y", "z/w", " ", "\n"]) for _ in range(5)]
    plan = Plan(".", ["."], prefix, strip_dot, {"."}, ["."])
    assert plan.display_joined("\0".join(rels)) == "\0".join(plan.display(r) for r in rels)


@pytest.mark.parametrize("seed", range(100))
def test_glob_listing_of_the_joined_paths_is_glob_lines(seed: int) -> None:
    rnd = random.Random(seed)
    odd = ["", " ", "\t", "\n", '"', "\x7f", "é", "\\", "dir/", "file.py"]
    paths = ["".join(rnd.choice(odd) for _ in range(rnd.randint(1, 4))) for _ in range(rnd.randint(1, 6))]
    assert glob_listing("\0".join(paths), paths) == glob_lines(paths)


def test_finish_joined_is_finish_joined_by_nul() -> None:
    out = b"".join(b"./d%03d/f\xc3\xa9%d\0" % (i % 7, i) for i in range(500)) + b"bad\xff\0"
    one, two = GlobCollector(100), GlobCollector(100)
    for i in range(0, len(out), 333):
        one.feed(out[i : i + 333])
        two.feed(out[i : i + 333])
    assert one.finish_joined() == "\0".join(two.finish())
    assert (one.total, one.drops.facts()) == (two.total, two.drops.facts())
    assert GlobCollector(5).finish_joined() == "" and GlobCollector(5).finish() == []


def test_the_cached_environment_size_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    rg = Rg("/bin/rg", (15, 0, 0), "PATH")
    base.check_exec(rg, ["--files"], {})
    assert base._env_size_cache is not None and base._env_size_cache[0] is shared_rg_env()
    assert base._env_size_cache[1] == base._env_size(rg_env())
    monkeypatch.setenv("SEARCH_FIXED_COST_TEST", "x" * 5000)
    base.check_exec(rg, ["--files"], {})
    assert base._env_size_cache[1] == base._env_size(rg_env())  # measured again, with the new variable
    assert "SEARCH_FIXED_COST_TEST" in base._env_size_cache[0]


def test_shared_env_is_the_same_object_until_the_environment_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    first = shared_rg_env()
    assert shared_rg_env() is first and rg_env() == first and rg_env() is not first
    monkeypatch.setenv("SEARCH_FIXED_COST_TEST", "one")
    assert shared_rg_env() is not first and shared_rg_env()["SEARCH_FIXED_COST_TEST"] == "one"


def test_widening_a_pipe_through_its_read_end_keeps_what_it_holds() -> None:
    r, w = rgmod._stdout_pipe()
    try:
        data = os.urandom(65536)  # a full default pipe, as rg may leave it before the widening
        os.write(w, data)
        assert rgmod._widen(r)
        assert fcntl.fcntl(r, _F_GETPIPE_SZ) == rgmod.RG_PIPE_BYTES
        os.write(w, b"more")  # room now beyond the first 64 KiB
        got = b""
        while len(got) < len(data) + 4:
            got += os.read(r, 1 << 20)
        assert got == data + b"more"
    finally:
        os.close(r)
        os.close(w)


async def test_glob_of_one_directory_runs_rg_without_a_path_and_lists_the_same(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rel in ("a.py", "sub/b.py", ".hidden/c.py", "sub/deeper/d.py", ".git/e.py", "x.txt"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text("x\n")
    seen: list[list[str]] = []
    real = rgmod.spawn

    def spy(path: str, argv: list[str], cwd: str, stdout: int, stderr: int, *rest: int):  # type: ignore[no-untyped-def]
        seen.append(argv)
        return real(path, argv, cwd, stdout, stderr, *rest)

    monkeypatch.setattr(rgmod, "spawn", spy)
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step(
            [
                {"name": "glob", "arguments": {"pattern": "*.py"}},
                {"name": "glob", "arguments": {"pattern": "*.py", "path": "sub"}},
                {"name": "glob", "arguments": {"pattern": "sub/**/*.py"}},  # anchored at the root
            ]
        )
    top, sub, anchored = res.results
    assert top.metadata["paths"] == [".hidden/c.py", "a.py", "sub/b.py", "sub/deeper/d.py"]
    assert top.text == ".hidden/c.py\na.py\nsub/b.py\nsub/deeper/d.py"
    assert sub.metadata["paths"] == ["sub/b.py", "sub/deeper/d.py"]
    assert anchored.metadata["paths"] == ["sub/b.py", "sub/deeper/d.py"]
    assert len(seen) == 3 and all(argv[-1] == "--" for argv in seen)  # no path: rg lists its directory


async def test_a_search_path_replaced_before_rg_starts_is_refused_as_such(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory checked is swapped for a file just before rg's start (a real chdir failure):
    refused naming the search path, never reported as rg gone missing."""
    (workspace / "d").mkdir()
    (workspace / "d" / "a.py").write_text("x\n")
    real = rgmod.spawn
    swap = {"on": False}
    # The swap is made by a thread started here: rg's spawner thread may be in a view of its own
    # (confine.py), where the workspace is read-only.
    go, swapped = threading.Event(), threading.Event()

    def swapper() -> None:
        while go.wait():
            go.clear()
            shutil.rmtree(workspace / "d")
            (workspace / "d").write_text("now a file\n")
            swapped.set()

    threading.Thread(target=swapper, daemon=True).start()

    def swapping(path: str, argv: list[str], cwd: str, stdout: int, stderr: int, *rest: int):  # type: ignore[no-untyped-def]
        if swap["on"]:
            go.set()
            assert swapped.wait(10)
            swapped.clear()
        return real(path, argv, cwd, stdout, stderr, *rest)

    monkeypatch.setattr(rgmod, "spawn", swapping)
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        first = await s.step([{"name": "glob", "arguments": {"pattern": "*.py", "path": "d"}}])
        assert first.results[0].metadata["paths"] == ["d/a.py"]
        swap["on"] = True
        res = await s.step([{"name": "glob", "arguments": {"pattern": "*.py", "path": "d"}}])
        rec = res.results[0]
        assert rec.outcome != "ok" and "removed or replaced" in rec.text and "d" in rec.text
        assert "RgUnavailable" not in str(rec.metadata)
        swap["on"] = False
        (workspace / "d").unlink()
        (workspace / "d").mkdir()
        again = await s.step([{"name": "glob", "arguments": {"pattern": "*", "path": "d"}}])
        assert again.results[0].outcome == "ok"  # rg was not forgotten: the next call just runs


async def test_the_usual_checks_still_refuse(workspace: Path) -> None:
    (workspace / "f.txt").write_text("x\n")
    os.symlink(workspace / "missing", workspace / "dangling")
    os.symlink("/etc", workspace / "out")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step(
            [
                {"name": "glob", "arguments": {"pattern": "*", "path": "f.txt"}},
                {"name": "glob", "arguments": {"pattern": "*", "path": "nothing"}},
                {"name": "glob", "arguments": {"pattern": "*", "path": "dangling"}},
                {"name": "glob", "arguments": {"pattern": "*", "path": "out"}},
                {"name": "grep", "arguments": {"pattern": "x", "path": "nothing"}},
                {"name": "grep", "arguments": {"pattern": "x", "path": "f.txt"}},
            ]
        )
    not_dir, missing, dangling, outside, grep_missing, grep_file = res.results
    assert "is not a directory" in not_dir.text
    assert "does not exist" in missing.text and "does not exist" in grep_missing.text
    assert "does not exist" in dangling.text  # resolved through the link: its target is missing
    assert outside.outcome != "ok" and "outside the workspace" in outside.text
    assert grep_file.outcome == "ok" and grep_file.metadata["totalMatches"] == 1


@pytest.mark.parametrize("linked", [False, True])
def test_the_default_path_is_the_root_resolve_finds(tmp_path: Path, linked: bool) -> None:
    from types import SimpleNamespace

    from zuno.workspace import Workspace

    (tmp_path / "real").mkdir()
    root = tmp_path / "real"
    if linked:  # a workspace named through a symbolic link: its root is the real directory
        os.symlink(root, tmp_path / "link")
        root = tmp_path / "link"
    ws = Workspace(root)
    ctx = SimpleNamespace(workspace=ws, check_location=lambda *a: None)  # no permission rules
    assert base.resolve_roots(ctx, ["."], "path", dirs_only=True) == [ws.resolve(".")]  # type: ignore[arg-type]
    assert base.resolve_roots(ctx, ["."], "path", dirs_only=False) == [ws.resolve(".")]  # type: ignore[arg-type]


async def test_a_finished_drain_is_unhooked_once(tmp_path: Path) -> None:
    """close() after the end of file (the run's finally does it again) leaves the loop alone."""
    import asyncio

    loop = asyncio.get_running_loop()
    r, w = rgmod._stdout_pipe()
    got: list[bytes] = []
    drain = rgmod._Drain(loop, r, got.append)
    os.write(w, b"abc")
    os.close(w)
    await drain.done
    assert drain.closed and got == [b"abc"]
    removed: list[int] = []
    real = loop.remove_reader
    loop.remove_reader = lambda fd: removed.append(fd) or real(fd)  # type: ignore[method-assign]
    try:
        drain.close()
    finally:
        loop.remove_reader = real  # type: ignore[method-assign]
    os.close(r)
    assert removed == []

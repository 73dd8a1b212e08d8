"""rg in a view of its own (tools/search/mountview.py): what the view holds, read from outside
through /proc and from inside by rg itself; that nothing of it is seen by the process; that a root
replaced since the view was made is searched as it is now; and that a process without the right to
make a mount namespace falls back to Landlock."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import zuno
from zuno.tools.search import confine, mountview
from zuno.tools.search.rg import run_rg
from zuno.tools.search.rg_discovery import Rg, discover


def _rg() -> Rg:
    rg = discover(None)
    assert isinstance(rg, Rg)
    return rg


def _view(roots: list[Path], rg_path: str | None = None) -> confine.Confinement:
    c = confine.Confinement(roots, rg_path or _rg().path, kinds=(confine.VIEW,))
    if not c.confined:
        pytest.skip(f"no view here: {c.problem}")
    return c


def _mount_points(mountinfo: str) -> list[str]:
    return [line.split()[4] for line in Path(mountinfo).read_text().splitlines()]


def _allowed(rg_path: str, roots: list[Path]) -> list[str]:
    rg_dirs = {os.path.dirname(os.path.realpath(rg_path)), os.path.dirname(rg_path)}
    libs = {os.path.realpath(d) for d in confine.SYSTEM_LIBRARY_DIRS if os.path.isdir(d)}
    ignore_files = {str(f) for f in confine.readable_files(roots)}
    return sorted({*(str(r) for r in roots), *rg_dirs, *libs, *confine.LOADER_FILES, *ignore_files})


def _beneath(path: str, allowed: list[str]) -> bool:
    return any(path == a or path.startswith(a.rstrip("/") + "/") for a in allowed)


def test_the_views_mounts_are_its_root_and_what_it_binds_and_the_process_sees_none(workspace: Path) -> None:
    before = _mount_points("/proc/self/mountinfo")
    stages_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "zuno-rg-view-*")))
    c = _view([workspace])
    tid = c._spawner.native_id
    inside = _mount_points(f"/proc/{os.getpid()}/task/{tid}/mountinfo")
    assert inside[0] == "/"  # the view's own root, the process's let go of
    allowed = _allowed(_rg().path, [workspace])
    strays = [m for m in inside[1:] if not _beneath(m, allowed)]
    assert strays == [], f"the view holds more than it should: {strays}"
    assert str(workspace) in inside
    assert _mount_points("/proc/self/mountinfo") == before, "the view's mounts leaked into the process"
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "zuno-rg-view-*"))) == stages_before


async def test_rg_listing_the_whole_view_finds_only_what_a_search_may_read(tmp_path: Path) -> None:
    """rg --files / in the view: every file it can find is beneath a root, rg's own directory, the
    system's libraries, or is the loader cache or an ignore file above the root."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "beside.txt").write_text("not in the workspace\n")
    ws = repo / "ws"
    ws.mkdir()
    (ws / "in.txt").write_text("x\n")
    rg = _rg()
    c = _view([ws])
    got = bytearray()
    argv = ["--no-config", "--files", "--hidden", "--no-ignore", "/"]
    res = await run_rg(rg, argv, str(ws), got.extend, confinement=c)
    assert res.confined and res.confinement == confine.VIEW
    files = got.decode().splitlines()
    assert str(ws / "in.txt") in files
    allowed = _allowed(rg.path, [ws])
    assert str(repo / ".gitignore") in allowed
    strays = [f for f in files if not _beneath(f, allowed)]
    assert strays == [], f"rg could read outside what a search may: {strays[:5]}"
    assert str(repo / "beside.txt") not in files
    assert not any(f.startswith("/etc/") and f not in confine.LOADER_FILES for f in files)


async def test_a_root_replaced_since_the_view_was_made_is_searched_as_it_is_now(tmp_path: Path) -> None:
    """The view binds the directory a root was; a root moved away and made again at its path is
    seen at the next search (a new view), never the moved directory, now outside the workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "old.txt").write_text("needle old\n")
    rg = _rg()
    c = _view([ws])

    async def search() -> str:
        got = bytearray()
        res = await run_rg(rg, ["--no-config", "needle"], str(ws), got.extend, confinement=c)
        assert res.confined
        return got.decode()

    assert "old.txt" in await search()
    ws.rename(tmp_path / "moved-away")
    ws.mkdir()
    (ws / "new.txt").write_text("needle new\n")
    text = await search()
    assert "new.txt" in text and "old.txt" not in text


async def test_an_rg_reached_through_a_symlinked_directory_starts_in_the_view(tmp_path: Path) -> None:
    real = _rg()
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(real.path, links / "rg")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("needle\n")
    c = _view([ws], str(links / "rg"))
    got = bytearray()
    linked = Rg(str(links / "rg"), real.version, real.source)
    res = await run_rg(linked, ["--no-config", "needle"], str(ws), got.extend, confinement=c)
    assert res.returncode == 0 and "a.txt" in got.decode()


def test_the_symlinks_on_the_way_to_a_bound_path_are_made_again_as_they_are(tmp_path: Path) -> None:
    """The view is built by a thread of a child process (it is entered for good): a root reached
    through a chain of symlinks, one of them relative, resolves in the view to the same files."""
    real = tmp_path / "data" / "ws"
    real.mkdir(parents=True)
    (real / "f.txt").write_text("inside\n")
    os.symlink("data", tmp_path / "hop")  # relative
    os.symlink(tmp_path / "hop" / "ws", tmp_path / "entry")  # absolute, through the relative one
    code = f"""
import os, sys, threading
from zuno.tools.search import mountview
out = []
def run():
    plan = mountview.ViewPlan([{str(tmp_path / "entry")!r}], [])
    stage = mountview.new_stage(plan.dirs)
    mountview.enter(plan, stage)
    out.append(open({str(tmp_path / "entry" / "f.txt")!r}).read())
    out.append(os.path.exists({str(tmp_path / "data")!r} + "/../other"))
    try:
        open("/etc/hostname")
        out.append("outside readable")
    except OSError:
        out.append("outside absent")
t = threading.Thread(target=run); t.start(); t.join()
print(out)
print(os.path.exists("/etc"))  # the process's own root is untouched
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    if "Operation not permitted" in done.stderr:
        pytest.skip("no right to make a mount namespace here")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['inside\\n', False, 'outside absent']", "True"]


def test_without_the_right_to_make_a_mount_namespace_rg_is_confined_by_landlock(tmp_path: Path) -> None:
    """A process without CAP_SYS_ADMIN (dropped from its bounding set before it starts) cannot make
    a view: its searches run in a Landlock domain, and say so."""
    if confine.landlock_abi() == 0:
        pytest.skip("no Landlock on this kernel")
    capsh = "/usr/sbin/capsh"
    if not os.path.exists(capsh) or os.geteuid() != 0:
        pytest.skip("needs capsh, run as root, to drop the capability")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("needle\n")
    code = f"""
import asyncio, zuno
async def main():
    async with zuno.Runtime(root={str(ws)!r}) as rt, rt.session() as s:
        rec = (await s.step([{{"name": "grep", "arguments": {{"pattern": "needle"}}}}])).results[0]
        print(rec.outcome, rec.metadata["rg"]["confined"], rec.metadata["rg"]["confinement"])
asyncio.run(main())
"""
    env = {**os.environ, "ZUNO_HOME": str(tmp_path / "home")}
    cmd = f"exec {sys.executable} -c \"$ZUNO_CODE\""
    done = subprocess.run(
        [capsh, "--drop=cap_sys_admin", "--", "-c", cmd],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**env, "ZUNO_CODE": code},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "True", confine.LANDLOCK], done.stdout + done.stderr


async def test_a_search_through_the_runtime_says_it_ran_in_the_view(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _view([workspace])  # skips where there is none
    monkeypatch.setattr(confine, "_cache", {})
    (workspace / "a.txt").write_text("needle\n")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        rec = (await s.step([{"name": "grep", "arguments": {"pattern": "needle"}}])).results[0]
    assert str(rec.outcome) == "ok" and "a.txt" in rec.text
    assert rec.metadata["rg"]["confined"] is True
    assert rec.metadata["rg"]["confinement"] == confine.VIEW
    assert mountview.available()


def test_a_view_made_where_mounts_propagate_is_still_never_seen_outside(tmp_path: Path) -> None:
    """On a system whose root mount is shared (systemd makes it so), a mount made in a copy of the
    namespace would appear in the original too, unless the copy is made a slave first. A child in a
    namespace of its own with shared propagation makes a view; its own mount table stays as it was."""
    ws = tmp_path / "ws"
    ws.mkdir()
    code = f"""
from pathlib import Path
from zuno.tools.search import confine
from zuno.tools.search.rg_discovery import discover
table = lambda: [l.split()[4] for l in Path("/proc/self/mountinfo").read_text().splitlines()]
before = table()
c = confine.Confinement([Path({str(ws)!r})], discover(None).path, kinds=(confine.VIEW,))
print(c.kind, table() == before)
"""
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "shared", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if "Operation not permitted" in done.stderr:
        pytest.skip("no right to make a mount namespace here")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [confine.VIEW, "True"], done.stdout + done.stderr


async def test_the_view_is_never_built_beneath_a_root_it_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TMPDIR inside the workspace: a view built there would be bound into the view with the root,
    and a search of the root would walk the view itself (the system's libraries among its files).
    It is built elsewhere; where there is nowhere else, rg is confined another way."""
    ws = tmp_path / "ws"
    (ws / "tmp").mkdir(parents=True)
    (ws / "a.txt").write_text("needle\n")
    monkeypatch.setattr(mountview, "STAGE_PARENTS", (str(ws / "tmp"), tempfile.gettempdir()))
    rg = _rg()
    c = _view([ws])
    got = bytearray()
    res = await run_rg(rg, ["--no-config", "--files", "--hidden", "--no-ignore"], str(ws), got.extend, confinement=c)
    assert res.returncode == 0 and res.confinement == confine.VIEW
    assert sorted(got.decode().splitlines()) == ["a.txt"]
    assert list((ws / "tmp").iterdir()) == []
    monkeypatch.setattr(mountview, "STAGE_PARENTS", (str(ws / "tmp"),))
    nowhere = confine.Confinement([ws], rg.path, kinds=(confine.VIEW,))
    assert not nowhere.confined and "no directory to build the view on" in str(nowhere.problem)

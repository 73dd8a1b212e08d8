"""Issue 10, item 1 and item 7 (path tools): no symbolic link swapped in while files are created
lets a file land outside the workspace, and link loops / over-long names are typed refusals.

The race is the attacker's: a thread swaps a directory inside the workspace with a symlink to an
outside directory using renameat2(RENAME_EXCHANGE), continuously, while hundreds of creations run
through Session.step (write, apply_patch, edit, save_artifact)."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import safefs

RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _renameat2() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:  # glibc before 2.28: the raw syscall (316 on x86_64, 276 on aarch64)
        nr = {"x86_64": 316, "aarch64": 276}.get(os.uname().machine)
        if nr is None:
            pytest.skip("renameat2 is not reachable on this machine")

        def fn(a: int, b: bytes, c: int, d: bytes, flags: int) -> int:
            return libc.syscall(nr, a, b, c, d, flags)

    return fn


class Swapper(threading.Thread):
    """Exchanges two names (a directory and a symlink) until stopped."""

    def __init__(self, a: Path, b: Path) -> None:
        super().__init__(daemon=True)
        self.a, self.b = os.fsencode(a), os.fsencode(b)
        self.stop = threading.Event()
        self.swaps = 0
        self.fn = _renameat2()

    def run(self) -> None:
        while not self.stop.is_set():
            if self.fn(AT_FDCWD, self.a, AT_FDCWD, self.b, RENAME_EXCHANGE) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
            self.swaps += 1


def _all_files(top: Path) -> list[Path]:
    out = []
    for dirpath, _dirs, files in os.walk(top, followlinks=False):
        out.extend(Path(dirpath) / f for f in files)
    return out


def _real_dir(ws: Path) -> Path:
    """Whichever of the two names is the real directory right now."""
    for name in ("d", "l"):
        p = ws / name
        if p.is_dir() and not p.is_symlink():
            return p
    raise AssertionError("no real directory left")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture
async def session(workspace: Path) -> AsyncIterator[Any]:
    # chord, with both editing styles on the surface (and save_artifact)
    cfg = {"tools": {"apply_patch": True}}
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg) as rt, rt.session() as s:
        yield s


def _patch_add(path: str, text: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch"


async def test_a_directory_swapped_for_a_symlink_never_lets_a_file_out(workspace: Path, session: Any) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (workspace / "d").mkdir()
    (workspace / "d" / "seed.txt").write_text("seed\n")
    os.symlink(outside, workspace / "l")
    swapper = Swapper(workspace / "d", workspace / "l")
    swapper.start()
    records: list[tuple[str, dict[str, Any]]] = []
    try:
        for batch_no in range(30):  # 300 creations, ten per step, in four shapes
            calls = []
            for k in range(10):
                i = batch_no * 10 + k
                name = f"f{i}.txt"
                shape = i % 3
                if shape == 0:
                    calls.append(call("write", path=f"d/{name}", content=f"w{i}\n"))
                elif shape == 1:
                    calls.append(call("apply_patch", patch=_patch_add(f"d/{name}", f"p{i}")))
                else:
                    calls.append(call("write", path=f"d/sub{i}/{name}", content=f"n{i}\n"))
                records.append((name, calls[-1]))
            res = await session.step(calls)
            for (_name, sent), rec in zip(records[-10:], res.results, strict=True):
                sent["result"] = rec.to_json()
    finally:
        swapper.stop.set()
        swapper.join(10)
    assert swapper.swaps > 100, "the swapper barely ran; the race did not happen"
    leaked = _all_files(outside) + [p for p in outside.rglob("*")]
    assert leaked == [], f"files created outside the workspace: {leaked[:10]}"
    inside = {p.name for p in _all_files(_real_dir(workspace))}
    assert not [n for n in inside if n.endswith(safefs.TMP_SUFFIX)], "stray temporary files"
    ok = refused = 0
    for name, sent in records:
        r = sent["result"]
        if r["outcome"] == "ok":
            ok += 1
            assert name in inside, f"{name} was reported ok but is not inside the workspace"
        else:
            refused += 1
            assert (r["outcome"], r["block_kind"]) in {("blocked", "denied"), ("blocked", "invalid_arguments")} or (
                r["outcome"] == "error" and "nothing was written" in r["text"]
            ), r["text"]
            assert "symbolic link" in r["text"] or "outside the workspace" in r["text"], r["text"]
    print(f"swaps={swapper.swaps} ok={ok} refused={refused}")  # shown with -s, and on failure
    assert ok > 0 and ok + refused == 300
    assert list(workspace.parent.glob(f"outside/**/*{safefs.TMP_SUFFIX}")) == []


async def test_edit_and_save_artifact_under_a_swap_stay_inside(workspace: Path, session: Any) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (workspace / "d").mkdir()
    for i in range(40):
        (workspace / "d" / f"e{i}.txt").write_text(f"old {i}\n")
        (outside / f"e{i}.txt").write_text(f"old {i}\n")  # the same names and bytes, outside
    os.symlink(outside, workspace / "l")
    res = await session.step([call("read", path=f"d/e{i}.txt") for i in range(40)])
    assert all(r.outcome == "ok" for r in res.results)
    swapper = Swapper(workspace / "d", workspace / "l")
    swapper.start()
    try:
        res = await session.step(
            [call("edit", path=f"d/e{i}.txt", old_string=f"old {i}", new_string=f"new {i}") for i in range(40)]
        )
    finally:
        swapper.stop.set()
        swapper.join(10)
    assert sorted(p.read_text() for p in outside.iterdir()) == sorted(f"old {i}\n" for i in range(40))
    assert [p.name for p in outside.iterdir() if p.name.endswith(safefs.TMP_SUFFIX)] == []
    for r in res.results:
        assert r.outcome == "ok" or r.block_kind is not None or "nothing" in r.text.lower(), r.text


async def test_state_folder_links_are_refused_for_artifacts(workspace: Path, session: Any) -> None:
    outside = workspace.parent / "elsewhere"
    outside.mkdir()
    (workspace / ".zuno").mkdir(exist_ok=True)
    art = workspace / ".zuno" / "artifacts"
    if art.exists():
        import shutil

        shutil.rmtree(art)
    os.symlink(outside, art)
    res = await session.step([call("save_artifact", filename="notes/a.md", content="x")])
    r = res.results[0]
    assert (str(r.outcome), str(r.block_kind)) == ("blocked", "denied"), r.text
    assert "symbolic link" in r.text and list(outside.iterdir()) == []


async def test_a_symlink_loop_is_invalid_arguments_naming_the_field(workspace: Path, session: Any) -> None:
    os.symlink("loop", workspace / "loop")
    res = await session.step(
        [
            call("read", path="loop/x.txt"),
            call("write", path="loop", content="x"),
            call("apply_patch", patch=_patch_add("loop/y.txt", "y")),
        ]
    )
    for r, field in zip(res.results, ("path", "path", "patch"), strict=True):
        assert (str(r.outcome), str(r.block_kind)) == ("blocked", "invalid_arguments"), r.text
        assert f"argument '{field}'" in r.text and "loop" in r.text


async def test_a_name_over_255_bytes_is_invalid_arguments_naming_the_field(workspace: Path, session: Any) -> None:
    long = "a" * 256
    res = await session.step(
        [
            call("write", path=f"d/{long}.txt", content="x"),
            call("read", path=long),
            call("edit", path=long, old_string="a", new_string="b"),
            call("apply_patch", patch=_patch_add(long, "y")),
            call("write", path="é" * 128, content="x"),  # 256 bytes in UTF-8, 128 characters
        ]
    )
    for r, field in zip(res.results, ("path", "path", "path", "patch", "path"), strict=True):
        assert (str(r.outcome), str(r.block_kind)) == ("blocked", "invalid_arguments"), r.text
        assert f"argument '{field}'" in r.text and "255 bytes" in r.text
    ok = await session.step([call("write", path="b" * 255, content="x")])
    assert str(ok.results[0].outcome) == "ok", ok.results[0].text
    assert list(workspace.parent.glob("**/*.zuno-tmp")) == []


def test_the_walk_uses_openat2_here_and_the_chain_without_it(workspace: Path, monkeypatch: Any) -> None:
    (workspace / "a" / "b").mkdir(parents=True)
    os.symlink(workspace / "a", workspace / "ln")
    t = safefs.Target(workspace.resolve(), ("a", "b", "f.txt"))
    via_link = safefs.Target(workspace.resolve(), ("ln", "b", "f.txt"))
    for available in (safefs.openat2_available(), False):
        monkeypatch.setattr(safefs, "_openat2_ok", available)
        safefs.atomic_write(t, b"x", None)
        assert safefs.read_bytes(t) == b"x"
        with pytest.raises(zuno.Refused) as e:
            safefs.atomic_write(via_link, b"y", None)
        assert "'ln'" in e.value.message
        with pytest.raises(zuno.Refused):
            safefs.read_bytes(via_link)
        safefs.unlink(t)
        assert safefs.lstat(t) is None
    assert not (workspace / "a" / "b" / "f.txt").exists()


def test_errors_of_the_walk_are_typed(workspace: Path) -> None:
    (workspace / "file").write_text("x")
    root = workspace.resolve()
    with pytest.raises(NotADirectoryError):
        safefs.atomic_write(safefs.Target(root, ("file", "x.txt")), b"", None)
    with pytest.raises(FileNotFoundError):
        safefs.read_bytes(safefs.Target(root, ("missing", "x.txt")))
    with pytest.raises(IsADirectoryError):
        safefs.atomic_write(safefs.Target(root, ()), b"", None)
    os.mkfifo(workspace / "fifo")
    with pytest.raises(safefs.NotRegular) as e:
        safefs.read_bytes(safefs.Target(root, ("fifo",)))
    assert e.value.errno == errno.EINVAL and "FIFO" in e.value.what


async def test_a_link_inside_the_workspace_is_resolved_once_to_its_real_path(workspace: Path, session: Any) -> None:
    """The choice for links that stay inside: resolved once, by name, to the real path (which must
    be inside), then opened component by component without following anything."""
    (workspace / "real").mkdir()
    os.symlink("real", workspace / "alias")
    res = await session.step([call("write", path="alias/new.txt", content="x\n")])
    rec = res.results[0]
    assert str(rec.outcome) == "ok" and rec.metadata["writtenPaths"] == ["real/new.txt"], rec.text
    assert (workspace / "real" / "new.txt").read_text() == "x\n" and (workspace / "alias").is_symlink()
    res = await session.step([call("read", path="alias/new.txt"), call("read", path="alias")])
    assert [str(r.outcome) for r in res.results] == ["ok", "ok"] and "new.txt" in res.results[1].text


async def test_a_granted_directory_is_its_own_root(workspace: Path) -> None:
    extra = workspace.parent / "granted"
    extra.mkdir()
    cfg = {"workspace": {"granted_dirs": [str(extra)]}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        res = await s.step([call("write", path=str(extra / "deep" / "g.txt"), content="g\n")])
        assert str(res.results[0].outcome) == "ok", res.results[0].text
        res = await s.step([call("read", path=str(extra / "deep" / "g.txt"))])
        assert "1\tg" in res.results[0].text
    assert (extra / "deep" / "g.txt").read_text() == "g\n"


def test_fsutil_atomic_write_walks_beneath_without_following(workspace: Path) -> None:
    from zuno.fsutil import atomic_write

    outside = workspace.parent / "out"
    outside.mkdir()
    os.symlink(outside, workspace / "hop")
    atomic_write(workspace / "made" / "x.txt", b"x", None, beneath=workspace)
    assert (workspace / "made" / "x.txt").read_bytes() == b"x"
    with pytest.raises(zuno.Refused):
        atomic_write(workspace / "hop" / "y.txt", b"y", None, beneath=workspace)
    assert list(outside.iterdir()) == []

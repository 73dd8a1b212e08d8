"""Hard links kept by a rewrite (seventeenth round). write, edit and apply_patch replaced a file by
renaming a temporary file over its name, so a file with hard links got a new inode under that one
name and its other names silently kept the old content. Now a file with more than one name is
rewritten inside its own inode (through the descriptor opened without following a link and checked
to still hold what was read), after the new bytes are flushed to a temporary recovery copy beside
it; a file with one name is still replaced by the atomic rename. Real files, real links."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from stepclient import StepClient
from test_safe_paths import Swapper
from zuno import safefs


@pytest.fixture
async def z(workspace: Path) -> AsyncIterator[StepClient]:
    cfg = {"tools": {"apply_patch": True}}  # chord, with both editing styles on the surface
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg) as rt, rt.session() as s:
        yield StepClient(s, workspace)


def patch(*lines: str) -> str:
    return "\n".join(("*** Begin Patch", *lines, "*** End Patch"))


def temps(root: Path) -> list[Path]:
    return [p for p in root.rglob(f"*{safefs.TMP_SUFFIX}")]


async def _edit(z: StepClient) -> dict[str, Any]:
    return await z.call("edit", path="f.txt", old_string="one", new_string="two")


async def _write(z: StepClient) -> dict[str, Any]:
    return await z.call("write", path="f.txt", content="two\n")


async def _patch(z: StepClient) -> dict[str, Any]:
    return await z.call("apply_patch", patch=patch("*** Update File: f.txt", "@@", "-one", "+two"))


@pytest.mark.parametrize("tool", [_edit, _write, _patch], ids=["edit", "write", "apply_patch"])
async def test_every_name_of_a_hard_linked_file_shows_the_change(z: StepClient, tool: Any) -> None:
    f, other, far = z.root / "f.txt", z.root / "other.txt", z.root / "sub" / "far.txt"
    f.write_text("one\n")
    f.chmod(0o640)
    far.parent.mkdir()
    os.link(f, other)
    os.link(f, far)
    ino = f.stat().st_ino
    await z.read("f.txt")
    r = await tool(z)
    assert r["outcome"] == "ok", r["text"]
    for name in (f, other, far):
        assert name.read_text() == "two\n", name
        assert name.stat().st_ino == ino and name.stat().st_nlink == 3
    assert f.stat().st_mode & 0o777 == 0o640
    meta = r["metadata"]["files"][0] if tool is _patch else r["metadata"]
    assert (meta["hardLinks"], meta["inPlace"]) == (3, True)
    assert "3 hard links" in r["text"]
    assert temps(z.root) == []  # the recovery copy is gone once the inode is flushed


async def test_a_shorter_and_a_longer_rewrite_in_place_leave_exactly_the_new_bytes(z: StepClient) -> None:
    f = z.root / "f.txt"
    f.write_bytes(b"x" * 10_000)
    os.link(f, z.root / "other.txt")
    await z.read("f.txt")
    await z.ok("write", path="f.txt", content="short\n")
    assert (z.root / "other.txt").read_bytes() == b"short\n"
    await z.ok("write", path="f.txt", content="y" * 20_000)
    assert (z.root / "other.txt").read_bytes() == b"y" * 20_000


async def test_one_name_is_still_replaced_by_the_rename(z: StepClient) -> None:
    """The atomic rename stays for a file with one name: the name gets a new inode, and a reader
    that opened the file before the edit goes on reading the old content whole."""
    f = z.root / "f.txt"
    f.write_text("one\n")
    ino = f.stat().st_ino
    await z.read("f.txt")
    with f.open("rb") as held:
        r = await _edit(z)
        assert r["outcome"] == "ok", r["text"]
        assert held.read() == b"one\n"
    assert f.read_text() == "two\n"
    assert f.stat().st_ino != ino and f.stat().st_nlink == 1
    assert "hardLinks" not in r["metadata"] and "hard link" not in r["text"]


async def test_a_link_made_after_the_read_is_kept(z: StepClient) -> None:
    """The link count is taken on the descriptor at the write, not from the read: a link made
    after the file was read (one name then) still shows the edit."""
    f = z.root / "f.txt"
    f.write_text("one\n")
    await z.read("f.txt")
    os.link(f, z.root / "late.txt")
    r = await _edit(z)
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "late.txt").read_text() == "two\n"
    assert r["metadata"]["inPlace"] is True


async def test_a_move_of_a_hard_linked_file_leaves_its_other_names_with_the_old_content(z: StepClient) -> None:
    """A move is a new file at the destination and the source's name removed, as ``mv`` then a
    rewrite: the source's other hard links keep the old content, and the result says so."""
    a, keep = z.root / "a.txt", z.root / "keep.txt"
    a.write_text("one\n")
    os.link(a, keep)
    await z.read("a.txt")
    r = await z.call("apply_patch", patch=patch("*** Update File: a.txt", "*** Move to: b.txt", "@@", "-one", "+two"))
    assert r["outcome"] == "ok", r["text"]
    assert not a.exists() and (z.root / "b.txt").read_text() == "two\n"
    assert keep.read_text() == "one\n" and keep.stat().st_nlink == 1
    assert r["metadata"]["files"][0]["sourceOtherNames"] == 1
    assert "keep its old content" in r["text"]


async def test_a_change_between_the_check_and_the_write_is_found_on_the_descriptor(
    z: StepClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer changes the file (through its other name) after the tool checked the read
    receipt and before the bytes go in: the check on the descriptor about to be rewritten finds it,
    the call is a StaleRead and the other writer's bytes stay, under both names."""
    f, other = z.root / "f.txt", z.root / "other.txt"
    f.write_text("one\n")
    os.link(f, other)
    await z.read("f.txt")
    real = safefs._may_write

    def another_writer(name: str, pfd: int) -> bool:
        other.write_text("theirs\n")  # a real write, in place, between the check and the write
        return real(name, pfd)

    monkeypatch.setattr(safefs, "_may_write", another_writer)
    for tool in (_edit, _write, _patch):
        other.write_text("one\n")
        r = await tool(z)
        assert r["outcome"] != "ok", r["text"]
        assert "StaleRead" in r["text"] or r["metadata"].get("conflict", {}).get("kind") == "StaleRead", r["text"]
        assert f.read_text() == other.read_text() == "theirs\n"
        assert temps(z.root) == []
        await z.read("f.txt")
        f.write_text("one\n")
        await z.read("f.txt")


def test_atomic_write_refuses_a_file_that_is_not_what_was_expected(workspace: Path) -> None:
    f = workspace / "f.txt"
    f.write_text("one\n")
    os.link(f, workspace / "other.txt")
    t = safefs.Target(workspace, ("f.txt",))
    with pytest.raises(safefs.Changed) as e:
        safefs.atomic_write(t, b"two\n", None, keep_links=True, expect="0" * 64)
    assert e.value.digest != "0" * 64
    with pytest.raises(safefs.Changed):
        safefs.atomic_write(t, b"two\n", None, keep_links=True, expect=safefs.MISSING)
    assert f.read_text() == "one\n" and temps(workspace) == []


async def test_an_in_place_edit_under_a_directory_swap_stays_inside(workspace: Path, z: StepClient) -> None:
    """The attacker race of tests/test_safe_paths.py (a directory exchanged with a symlink to an
    outside directory, continuously) against edits of files with hard links: nothing outside is
    written, no recovery copy is left, and every edit that succeeded kept its links."""
    outside = workspace.parent / "outside"
    outside.mkdir()
    (workspace / "d").mkdir()
    for i in range(40):
        (workspace / "d" / f"e{i}.txt").write_text(f"old {i}\n")
        os.link(workspace / "d" / f"e{i}.txt", workspace / "d" / f"h{i}.txt")
        (outside / f"e{i}.txt").write_text(f"old {i}\n")  # the same names and bytes, outside
        os.link(outside / f"e{i}.txt", outside / f"h{i}.txt")
    os.symlink(outside, workspace / "l")
    res = await z.s.step([{"name": "read", "arguments": {"path": f"d/e{i}.txt"}} for i in range(40)])
    assert all(r.outcome == "ok" for r in res.results)
    swapper = Swapper(workspace / "d", workspace / "l")
    swapper.start()
    try:
        calls = [
            {"name": "edit", "arguments": {"path": f"d/e{i}.txt", "old_string": f"old {i}", "new_string": f"new {i}"}}
            for i in range(40)
        ]
        res = await z.s.step(calls)
    finally:
        swapper.stop.set()
        swapper.join(10)
    assert sorted(p.read_text() for p in outside.iterdir()) == sorted(f"old {i}\n" for i in range(40) for _ in "eh")
    assert temps(outside) == [] and temps(workspace) == []
    real = workspace / "d" if not (workspace / "d").is_symlink() else workspace / "l"
    for i, r in enumerate(res.results):
        assert r.outcome == "ok" or r.block_kind is not None or "nothing" in r.text.lower(), r.text
        if r.outcome == "ok":
            assert (real / f"h{i}.txt").read_text() == f"new {i}\n"


async def test_a_symlink_swapped_in_for_the_file_is_never_written_through(z: StepClient) -> None:
    """The file's own name exchanged, continuously, with a symlink to an outside file that has a
    hard link of its own: the writes that run meanwhile go into the real file (in place, its other
    name sees them) or are refused; the outside file never changes."""
    root = z.root
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside\n")
    os.link(outside / "f.txt", outside / "g.txt")
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("v0\n")
    os.link(root / "d" / "f.txt", root / "d" / "h.txt")
    os.symlink(outside / "f.txt", root / "d" / "s")
    await z.read("d/f.txt")
    swapper = Swapper(root / "d" / "f.txt", root / "d" / "s")
    swapper.start()
    results = []
    try:
        for i in range(1, 61):
            results.append(await z.call("write", path="d/f.txt", content=f"v{i}\n"))
    finally:
        swapper.stop.set()
        swapper.join(10)
    assert swapper.swaps > 100, "the swapper barely ran; the race did not happen"
    assert (outside / "f.txt").read_text() == "outside\n" and (outside / "f.txt").stat().st_nlink == 2
    ok = [r for r in results if r["outcome"] == "ok"]
    assert ok, [r["text"] for r in results[:3]]
    assert all(r["metadata"]["inPlace"] for r in ok)
    last = ok[-1]["metadata"]["sha256"]
    real = root / "d" / ("f.txt" if not (root / "d" / "f.txt").is_symlink() else "s")
    assert real.stat().st_nlink == 2 and hashlib.sha256(real.read_bytes()).hexdigest() == last
    assert (root / "d" / "h.txt").read_bytes() == real.read_bytes()
    for r in results:
        if r["outcome"] != "ok":
            assert any(w in r["text"] for w in ("symbolic link", "StaleRead", "outside the workspace")), r["text"]
    print({r["text"][:60] for r in results})
    assert temps(root) == [] and temps(outside) == []


def _mount_tmpfs(where: Path, options: str) -> bool:
    where.mkdir()
    if os.geteuid() != 0:
        return False
    mount = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)]
    return subprocess.run(mount, capture_output=True).returncode == 0


async def test_a_full_disk_while_extending_in_place_leaves_the_old_file_whole(z: StepClient) -> None:
    """The recovery copy fits, the inode's growth does not: the rewrite in place fails while
    extending the file, before any old byte changed, and the file is cut back. Every name keeps
    the old bytes, no copy is left, and the result says nothing was written (the file unchanged)."""
    full = z.root / "full"
    if not _mount_tmpfs(full, "size=256k"):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        f = full / "f.txt"
        f.write_text("one\n" * 2048)  # 8 KiB
        os.link(f, full / "other.txt")
        filler = full / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        os.truncate(filler, max(0, filler.stat().st_size - 48 * 1024))  # room for 48 KiB: the copy, not the growth
        await z.read("full/f.txt")
        for tool, args in (
            ("write", {"path": "full/f.txt", "content": "two\n" * 10240}),  # 40 KiB
            ("edit", {"path": "full/f.txt", "old_string": "one\n", "new_string": "two\n" * 6, "replace_all": True}),
        ):
            r = await z.call(tool, **args)
            assert r["outcome"] == "error" and "No space left" in r["text"], r["text"]
            assert "unchanged" in r["text"] or "nothing was written" in r["text"], r["text"]
            assert f.read_text() == (full / "other.txt").read_text() == "one\n" * 2048
            assert f.stat().st_nlink == 2 and temps(full) == []
    finally:
        subprocess.run(["umount", str(full)], check=False)  # noqa: ASYNC221 (a moment, nothing to overlap)


async def test_a_running_executable_with_links_is_replaced_and_the_result_says_so(z: StepClient) -> None:
    """The kernel refuses to open a running program for writing (ETXTBSY), so it cannot be
    rewritten in place: it is replaced by the rename, as before, and the result says that its
    other name keeps the old content."""
    prog = z.root / "prog"
    shutil.copy2("/bin/sleep", prog)
    os.link(prog, z.root / "alias")
    await z.call("read", path="prog")
    running = await asyncio.create_subprocess_exec(str(prog), "30")
    try:
        for _ in range(100):  # until the program is running (its text is in use)
            try:
                os.close(os.open(prog, os.O_RDWR))
            except OSError:
                break
            await asyncio.sleep(0.02)
        r = await z.call("write", path="prog", content="#!/bin/sh\n")
    finally:
        running.kill()
        await running.wait()
    assert r["outcome"] == "ok", r["text"]
    assert (r["metadata"]["hardLinks"], r["metadata"]["inPlace"]) == (2, False)
    assert "the other 1 name(s) keep the old content" in r["text"]
    assert prog.read_text() == "#!/bin/sh\n" and (z.root / "alias").read_bytes() == Path("/bin/sleep").read_bytes()


async def test_a_change_between_the_check_and_the_rename_is_found_too(
    z: StepClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same check on the rename path (a file with one name): another writer's bytes between
    the receipt check and the rename are found on the descriptor, and the rename does not happen."""
    f = z.root / "f.txt"
    f.write_text("one\n")
    await z.read("f.txt")
    real = safefs._may_write

    def another_writer(name: str, pfd: int) -> bool:
        f.write_text("theirs\n")
        return real(name, pfd)

    monkeypatch.setattr(safefs, "_may_write", another_writer)
    r = await _edit(z)
    assert r["metadata"].get("conflict", {}).get("kind") == "StaleRead", r["text"]
    assert f.read_text() == "theirs\n" and temps(z.root) == []

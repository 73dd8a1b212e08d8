"""apply_patch end to end: the peers' scenario shapes with Zuno's stricter semantics, every conflict
kind, line-ending preservation, and all-or-nothing across files."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from stepclient import StepClient
from zuno.tools.patch import applier

from conftest import batch


class Z(StepClient):
    async def read(self, *paths: str) -> None:
        for p in paths:
            r = await self.call("read", path=p)
            assert r["outcome"] == "ok", r["text"]

    async def patch(self, text: str) -> dict[str, Any]:
        return await self.call("apply_patch", patch=text)


@pytest.fixture
async def z(workspace: Path) -> AsyncIterator[Z]:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        yield Z(s, workspace)


def P(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".zuno" not in p.parts
    }


# -- the peers' scenario shapes ---------------------------------------------------------------


async def test_add_file(z: Z) -> None:
    r = await z.patch(P("*** Add File: bar.md", "+This is a new file", "+naïve ✅"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "bar.md").read_bytes() == "This is a new file\nnaïve ✅\n".encode()
    assert r["metadata"]["writtenPaths"] == ["bar.md"]


async def test_several_operations(z: Z) -> None:
    (z.root / "modify.txt").write_text("line1\nline2\n")
    (z.root / "delete.txt").write_text("obsolete\n")
    await z.read("modify.txt", "delete.txt")
    r = await z.patch(
        P(
            "*** Add File: nested/new.txt",
            "+created",
            "*** Delete File: delete.txt",
            "*** Update File: modify.txt",
            "@@",
            "-line2",
            "+changed",
        )
    )
    assert r["outcome"] == "ok", r["text"]
    assert snapshot(z.root) == {"modify.txt": b"line1\nchanged\n", "nested/new.txt": b"created\n"}
    assert sorted(r["metadata"]["writtenPaths"]) == ["modify.txt", "nested/new.txt"]


async def test_several_chunks(z: Z) -> None:
    (z.root / "multi.txt").write_text("line1\nline2\nline3\nline4\n")
    await z.read("multi.txt")
    r = await z.patch(
        P("*** Update File: multi.txt", "@@", " line1", "-line2", "+changed2", "@@", " line3", "-line4", "+changed4")
    )
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "multi.txt").read_text() == "line1\nchanged2\nline3\nchanged4\n"
    assert r["metadata"]["files"][0]["matchedAtLines"] == [1, 3]


async def test_move_to_new_directory(z: Z) -> None:
    (z.root / "old").mkdir()
    (z.root / "old/name.txt").write_text("old content\n")
    (z.root / "old/other.txt").write_text("unrelated\n")
    await z.read("old/name.txt")
    r = await z.patch(
        P("*** Update File: old/name.txt", "*** Move to: renamed/dir/name.txt", "@@", "-old content", "+new content")
    )
    assert r["outcome"] == "ok", r["text"]
    assert snapshot(z.root) == {"old/other.txt": b"unrelated\n", "renamed/dir/name.txt": b"new content\n"}
    assert r["metadata"]["writtenPaths"] == ["renamed/dir/name.txt"]
    assert r["metadata"]["files"][0]["from"] == "old/name.txt"


async def test_empty_patch_is_refused(z: Z) -> None:
    r = await z.patch("*** Begin Patch\n*** End Patch")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    assert "line 2" in r["text"] and "no file operation" in r["text"]


async def test_missing_context_is_a_context_mismatch(z: Z) -> None:
    (z.root / "modify.txt").write_text("line1\nline2\n")
    await z.read("modify.txt")
    r = await z.patch(P("*** Update File: modify.txt", "@@ section", "-missing", "+changed"))
    assert r["outcome"] == "error"
    c = r["metadata"]["conflict"]
    assert c["kind"] == "ContextMismatch"
    assert c["hunk"]["number"] == 1 and c["hunk"]["title"] == "section"
    assert "hunk 1 'section'" in r["text"]
    assert "not in the file" in r["text"]  # the anchor itself is missing
    assert (z.root / "modify.txt").read_text() == "line1\nline2\n"


async def test_mismatch_points_at_where_the_chunk_stops_matching(z: Z) -> None:
    (z.root / "f.txt").write_text("a\nb\nc\n")
    await z.read("f.txt")
    r = await z.patch(P("*** Update File: f.txt", "@@", " a", " b", "-X", "+Y"))
    assert r["metadata"]["conflict"]["kind"] == "ContextMismatch"
    assert "first 2 line(s) occur at line 1" in r["text"]
    assert r["metadata"]["conflict"]["suggestedCall"] == {
        "name": "read",
        "arguments": {"path": "f.txt", "offset": 1, "limit": 60},
    }


async def test_delete_of_a_missing_file_fails_and_writes_nothing(z: Z) -> None:
    (z.root / "foo.txt").write_text("stay\n")
    r = await z.patch(P("*** Add File: new.txt", "+x", "*** Delete File: missing.txt"))
    assert r["outcome"] == "error"
    assert "cannot delete missing.txt: no such file" in r["text"]
    assert snapshot(z.root) == {"foo.txt": b"stay\n"}


async def test_empty_update_hunk_is_refused(z: Z) -> None:
    (z.root / "foo.txt").write_text("x\n")
    r = await z.patch(P("*** Update File: foo.txt"))
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    assert "line 2" in r["text"] and "has no chunk" in r["text"]


async def test_update_of_a_missing_file_fails(z: Z) -> None:
    r = await z.patch(P("*** Update File: missing.txt", "@@", "-a", "+b"))
    assert r["outcome"] == "error"
    assert "no such file" in r["text"] and "*** Add File: missing.txt" in r["text"]
    assert not (z.root / "missing.txt").exists()


async def test_end_of_file_anchor_matches_only_at_the_end(z: Z) -> None:
    (z.root / "tail.txt").write_text("end\nmiddle\nend\n")
    await z.read("tail.txt")
    r = await z.patch(P("*** Update File: tail.txt", "@@", "-end", "+END", "*** End of File"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "tail.txt").read_text() == "end\nmiddle\nEND\n"


async def test_pure_addition_chunk(z: Z) -> None:
    (z.root / "input.txt").write_text("def a():\n    pass\ndef b():\n    pass\n")
    await z.read("input.txt")
    r = await z.patch(P("*** Update File: input.txt", "@@ def a():", "+    # first", "@@", "+# appended"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "input.txt").read_text() == "def a():\n    # first\n    pass\ndef b():\n    pass\n# appended\n"


async def test_anchor_repeated_as_first_context_line(z: Z) -> None:
    (z.root / "a.py").write_text("def f():\n    pass\ndef g():\n    pass\n")
    await z.read("a.py")
    r = await z.patch(P("*** Update File: a.py", "@@ def g():", " def g():", "-    pass", "+    return 2"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "a.py").read_text() == "def f():\n    pass\ndef g():\n    return 2\n"


async def test_padded_markers(z: Z) -> None:
    (z.root / "file.txt").write_text("one\n")
    await z.read("file.txt")
    r = await z.patch("*** Begin Patch \n  *** Update File: file.txt\n@@\n-one\n+two\n *** End Patch\n")
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "file.txt").read_text() == "two\n"


async def test_unicode_and_typographic_tolerance(z: Z) -> None:
    (z.root / "foo.txt").write_text("line1\nnaïve café — “quoted”\nline3\n", encoding="utf-8")
    await z.read("foo.txt")
    r = await z.patch(P("*** Update File: foo.txt", "@@", " line1", '-naïve café - "quoted"', "+naïve café ✅"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "foo.txt").read_text(encoding="utf-8") == "line1\nnaïve café ✅\nline3\n"
    assert r["metadata"]["files"][0]["match"] == "punctuation"


async def test_tolerant_match_keeps_the_files_own_context_text(z: Z) -> None:
    (z.root / "ws.txt").write_bytes(b"keep   \nold\n")
    await z.read("ws.txt")
    r = await z.patch(P("*** Update File: ws.txt", "@@", " keep", "-old", "+new"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "ws.txt").read_bytes() == b"keep   \nnew\n"


async def test_ambiguous_context_without_anchor_is_a_mismatch_and_anchor_resolves_it(z: Z) -> None:
    (z.root / "a.py").write_text("def f():\n    pass\ndef g():\n    pass\n")
    await z.read("a.py")
    r = await z.patch(P("*** Update File: a.py", "@@", "-    pass", "+    return 1"))
    assert r["metadata"]["conflict"]["kind"] == "ContextMismatch"
    assert "more than once" in r["text"]
    r = await z.patch(P("*** Update File: a.py", "@@ def g():", "-    pass", "+    return 1"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "a.py").read_text() == "def f():\n    pass\ndef g():\n    return 1\n"


# -- receipts and conflicts -------------------------------------------------------------------


def _conflict_shape(c: dict[str, Any]) -> None:
    assert set(c) == {"kind", "resource", "operationDigest", "currentDigest", "hunk", "requiredAction", "suggestedCall"}
    assert len(c["operationDigest"]) == 64 and c["requiredAction"]


async def test_read_required(z: Z) -> None:
    (z.root / "f.txt").write_text("a\n")
    r = await z.patch(P("*** Update File: f.txt", "@@", "-a", "+b"))
    c = r["metadata"]["conflict"]
    _conflict_shape(c)
    assert (c["kind"], c["resource"]) == ("ReadRequired", "f.txt")
    assert c["currentDigest"] == __import__("hashlib").sha256(b"a\n").hexdigest()
    assert "Read the named resource" in c["requiredAction"]
    assert c["suggestedCall"] == {"name": "read", "arguments": {"path": "f.txt"}}
    assert (z.root / "f.txt").read_text() == "a\n"


async def test_stale_read(z: Z) -> None:
    (z.root / "f.txt").write_text("a\n")
    await z.read("f.txt")
    (z.root / "f.txt").write_text("a\nchanged elsewhere\n")
    r = await z.patch(P("*** Update File: f.txt", "@@", "-a", "+b"))
    c = r["metadata"]["conflict"]
    _conflict_shape(c)
    assert c["kind"] == "StaleRead"
    assert (z.root / "f.txt").read_text() == "a\nchanged elsewhere\n"


async def test_identical_replay_after_success_and_after_a_conflict(z: Z) -> None:
    (z.root / "f.txt").write_text("a\n")
    await z.read("f.txt")
    patch = P("*** Update File: f.txt", "@@", "+appended")
    assert (await z.patch(patch))["outcome"] == "ok"
    r = await z.patch(patch)  # the lost-response retry: would append twice
    c = r["metadata"]["conflict"]
    _conflict_shape(c)
    assert c["kind"] == "IdenticalReplay"
    assert (z.root / "f.txt").read_text() == "a\nappended\n"
    # A mismatch resent unchanged against the same content is a replay too.
    bad = P("*** Update File: f.txt", "@@", "-nope", "+x")
    assert (await z.patch(bad))["metadata"]["conflict"]["kind"] == "ContextMismatch"
    await z.read("f.txt")
    assert (await z.patch(bad))["metadata"]["conflict"]["kind"] == "IdenticalReplay"
    # A real change makes the same operation new again.
    (z.root / "f.txt").write_text("nope\n")
    await z.read("f.txt")
    assert (await z.patch(bad))["outcome"] == "ok"


async def test_replay_table_is_durable_across_processes(run_zuno: Any, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\n")
    patch = P("*** Update File: f.txt", "@@", "+b")
    out = batch(
        run_zuno,
        [{"name": "read", "arguments": {"path": "f.txt"}}, {"name": "apply_patch", "arguments": {"patch": patch}}],
    )
    assert out["results"][1]["outcome"] == "ok", out["results"][1]["text"]
    again = batch(run_zuno, [{"name": "apply_patch", "arguments": {"patch": patch}}], "--session", out["session"])
    assert again["results"][0]["metadata"]["conflict"]["kind"] == "IdenticalReplay"
    assert (workspace / "f.txt").read_text() == "a\nb\n"


async def test_success_refreshes_receipts_so_the_model_may_patch_again(z: Z) -> None:
    (z.root / "f.txt").write_text("a\nb\n")
    await z.read("f.txt")
    assert (await z.patch(P("*** Update File: f.txt", "@@", "-a", "+A")))["outcome"] == "ok"
    r = await z.patch(P("*** Update File: f.txt", "@@", "-b", "+B"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "f.txt").read_text() == "A\nB\n"


async def test_existing_move_destination_needs_a_receipt(z: Z) -> None:
    (z.root / "src.txt").write_text("s\n")
    (z.root / "dst.txt").write_text("d\n")
    await z.read("src.txt")
    patch = P("*** Update File: src.txt", "*** Move to: dst.txt", "@@", "-s", "+S")
    r = await z.patch(patch)
    c = r["metadata"]["conflict"]
    assert (c["kind"], c["resource"]) == ("ReadRequired", "dst.txt")
    assert snapshot(z.root) == {"src.txt": b"s\n", "dst.txt": b"d\n"}
    await z.read("dst.txt")
    r = await z.patch(patch)
    assert r["outcome"] == "ok", r["text"]
    assert snapshot(z.root) == {"dst.txt": b"S\n"}


async def test_add_over_an_existing_file_needs_a_receipt(z: Z) -> None:
    (z.root / "dup.txt").write_text("old\n")
    r = await z.patch(P("*** Add File: dup.txt", "+new"))
    assert r["metadata"]["conflict"]["kind"] == "ReadRequired"
    assert (z.root / "dup.txt").read_text() == "old\n"
    await z.read("dup.txt")
    assert (await z.patch(P("*** Add File: dup.txt", "+new")))["outcome"] == "ok"
    assert (z.root / "dup.txt").read_text() == "new\n"


async def test_delete_needs_a_receipt_and_a_directory_is_not_deleted(z: Z) -> None:
    (z.root / "gone.txt").write_text("x\n")
    (z.root / "dir").mkdir()
    r = await z.patch(P("*** Delete File: gone.txt"))
    assert r["metadata"]["conflict"]["kind"] == "ReadRequired"
    await z.read("gone.txt")
    r = await z.patch(P("*** Delete File: gone.txt"))
    assert r["outcome"] == "ok" and not (z.root / "gone.txt").exists()
    assert r["metadata"]["writtenPaths"] == []
    r = await z.patch(P("*** Delete File: dir"))
    assert r["outcome"] == "error" and "not a regular file" in r["text"]


async def test_three_file_patch_whose_third_file_conflicts_leaves_all_three_untouched(z: Z) -> None:
    for name in ("one.txt", "two.txt", "three.txt"):
        (z.root / name).write_text(f"{name} line\n")
    await z.read("one.txt", "two.txt", "three.txt")
    before = snapshot(z.root)
    mtimes = {n: os.stat(z.root / n).st_mtime_ns for n in before}
    r = await z.patch(
        P(
            "*** Update File: one.txt",
            "@@",
            "-one.txt line",
            "+ONE",
            "*** Update File: two.txt",
            "@@",
            "-two.txt line",
            "+TWO",
            "*** Update File: three.txt",
            "@@ somewhere",
            "-not in the file",
            "+THREE",
        )
    )
    assert r["outcome"] == "error"
    c = r["metadata"]["conflict"]
    assert (c["kind"], c["resource"], c["hunk"]["number"], c["hunk"]["title"]) == (
        "ContextMismatch",
        "three.txt",
        3,
        "somewhere",
    )
    assert snapshot(z.root) == before
    assert {n: os.stat(z.root / n).st_mtime_ns for n in before} == mtimes
    assert r["metadata"]["writtenPaths"] == []


async def test_every_conflict_is_reported_not_only_the_first(z: Z) -> None:
    (z.root / "a.txt").write_text("a\n")
    (z.root / "b.txt").write_text("b\n")
    r = await z.patch(P("*** Update File: a.txt", "@@", "-a", "+A", "*** Update File: b.txt", "@@", "-b", "+B"))
    assert [c["resource"] for c in r["metadata"]["conflicts"]] == ["a.txt", "b.txt"]


# -- logical lines, original bytes ------------------------------------------------------------


async def test_crlf_file_keeps_crlf_and_new_lines_take_it(z: Z) -> None:
    (z.root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await z.read("w.txt")
    r = await z.patch(P("*** Update File: w.txt", "@@", " one", "-two", "+2", "+2b", " three"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "w.txt").read_bytes() == b"one\r\n2\r\n2b\r\nthree\r\n"


async def test_bom_is_kept(z: Z) -> None:
    (z.root / "b.txt").write_bytes(b"\xef\xbb\xbffirst\nsecond\n")
    await z.read("b.txt")
    r = await z.patch(P("*** Update File: b.txt", "@@", " first", "-second", "+2nd"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "b.txt").read_bytes() == b"\xef\xbb\xbffirst\n2nd\n"


async def test_no_final_newline_is_kept(z: Z) -> None:
    (z.root / "n.txt").write_bytes(b"a\nb")
    await z.read("n.txt")
    r = await z.patch(P("*** Update File: n.txt", "@@", " a", "-b", "+B", "+C"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "n.txt").read_bytes() == b"a\nB\nC"
    r = await z.patch(P("*** Update File: n.txt", "@@", "+tail"))
    assert (z.root / "n.txt").read_bytes() == b"a\nB\nC\ntail"


async def test_mixed_endings_keep_each_untouched_line(z: Z) -> None:
    (z.root / "m.txt").write_bytes(b"a\r\nb\nc\r\nd\r\n")
    await z.read("m.txt")
    r = await z.patch(P("*** Update File: m.txt", "@@", " c", "-d", "+D"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "m.txt").read_bytes() == b"a\r\nb\nc\r\nD\r\n"


async def test_non_utf8_bytes_survive(z: Z) -> None:
    (z.root / "l1.txt").write_bytes(b"caf\xe9\nold\n")
    await z.read("l1.txt")
    r = await z.patch(P("*** Update File: l1.txt", "@@", "-old", "+new"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "l1.txt").read_bytes() == b"caf\xe9\nnew\n"


async def test_file_mode_is_kept(z: Z) -> None:
    f = z.root / "run.sh"
    f.write_text("echo a\n")
    f.chmod(0o755)
    await z.read("run.sh")
    assert (await z.patch(P("*** Update File: run.sh", "@@", "-echo a", "+echo b")))["outcome"] == "ok"
    assert f.stat().st_mode & 0o777 == 0o755


# -- refusals ---------------------------------------------------------------------------------


async def test_state_folder_outside_paths_and_duplicates_are_refused(z: Z) -> None:
    r = await z.patch(P("*** Add File: .zuno/evil", "+x"))
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    r = await z.patch(P("*** Add File: ../outside.txt", "+x"))
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    r = await z.patch(P("*** Add File: a", "+x", "*** Add File: ./a", "+y"))
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    assert "operations 1 and 2" in r["text"]
    assert snapshot(z.root) == {}


async def test_grammar_error_is_invalid_arguments_naming_the_line(z: Z) -> None:
    r = await z.patch("*** Begin Patch\n*** Update File: a\n@@\n-x\n?? what\n*** End Patch")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    assert "line 5" in r["text"] and "starting with ' '" in r["text"]


# -- failure after writing began --------------------------------------------------------------


async def test_failure_after_the_first_write_is_uncertain_and_names_changed_paths(
    z: Z, monkeypatch: pytest.MonkeyPatch
) -> None:
    (z.root / "a.txt").write_text("a\n")
    (z.root / "b.txt").write_text("b\n")
    await z.read("a.txt", "b.txt")
    real = applier.safefs.atomic_write
    calls = {"n": 0}

    def flaky(where: Any, data: bytes, mode: int | None, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real(where, data, mode, **kw)

    monkeypatch.setattr(applier.safefs, "atomic_write", flaky)
    r = await z.patch(P("*** Update File: a.txt", "@@", "-a", "+A", "*** Update File: b.txt", "@@", "-b", "+B"))
    assert r["outcome"] == "uncertain", r["text"]
    assert r["metadata"]["observedChanged"] == ["a.txt"]
    assert "a.txt" in r["text"] and "Inspect" in r["text"]
    assert (z.root / "b.txt").read_text() == "b\n"


# -- end to end through the CLI ---------------------------------------------------------------


def test_cli_read_then_patch_in_a_later_invocation(run_zuno: Any, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"x\r\ny\r\n")
    first = batch(run_zuno, [{"name": "read", "arguments": {"path": "w.txt"}}])
    patch = P("*** Update File: w.txt", "@@", " x", "-y", "+z")
    out = batch(run_zuno, [{"name": "apply_patch", "arguments": {"patch": patch}}], "--session", first["session"])
    rec = out["results"][0]
    assert rec["outcome"] == "ok", rec["text"]
    assert rec["metadata"]["writtenPaths"] == ["w.txt"]
    assert rec["declarations"] == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
    assert (workspace / "w.txt").read_bytes() == b"x\r\nz\r\n"
    # Without a read in this new session: a typed conflict, not a write.
    other = batch(run_zuno, [{"name": "apply_patch", "arguments": {"patch": patch}}])
    assert other["results"][0]["metadata"]["conflict"]["kind"] == "ReadRequired"
    assert json.dumps(other).count("requiredAction") >= 1


async def test_many_hunks_on_a_large_file_match_a_plain_rewrite(z: Z) -> None:
    lines = [f"value_{i:05d} = compute({i})" for i in range(20_000)]
    (z.root / "big.py").write_text("\n".join(lines) + "\n")
    await z.read("big.py")
    body = ["*** Update File: big.py"]
    expected = list(lines)
    for t in range(50, 20_000, 100):
        body += ["@@", *(" " + lines[k] for k in range(t - 2, t)), "-" + lines[t], "+" + lines[t] + "  # x"]
        expected[t] = lines[t] + "  # x"
    r = await z.patch(P(*body))
    assert r["outcome"] == "ok", r["text"][:300]
    assert (z.root / "big.py").read_text() == "\n".join(expected) + "\n"
    assert r["metadata"]["files"][0]["chunks"] == 200


async def test_permission_rules_apply_to_every_path_of_a_patch(workspace: Path) -> None:
    rules = {"permission": {"rules": [{"tool": "apply_patch", "pattern": "secrets/*", "action": "deny"}]}}
    async with zuno.Runtime(root=workspace, config_overrides=rules) as rt, rt.session() as s:
        z = Z(s, workspace)
        r = await z.patch(P("*** Add File: ok.txt", "+x", "*** Add File: secrets/key.txt", "+y"))
        assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
        assert "secrets/key.txt" in r["text"]
        r = await z.patch(P("*** Add File: secrets/key.txt", "+y"))  # the subject: the dispatcher denies it
        assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    assert snapshot(workspace) == {}


async def test_delete_or_move_through_a_symlink_is_refused_update_goes_through(z: Z) -> None:
    (z.root / "real.txt").write_text("a\n")
    os.symlink("real.txt", z.root / "link.txt")
    await z.read("link.txt")
    for patch in (
        P("*** Delete File: link.txt"),
        P("*** Update File: link.txt", "*** Move to: m.txt", "@@", "-a", "+b"),
    ):
        r = await z.patch(patch)
        assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
        assert "symbolic link" in r["text"]
    r = await z.patch(P("*** Update File: link.txt", "@@", "-a", "+b"))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "link.txt").is_symlink() and (z.root / "real.txt").read_text() == "b\n"

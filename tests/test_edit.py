"""edit and delete: exact replacement with receipts, typed conflicts and line-ending rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from stepclient import StepClient

from conftest import batch


class Z(StepClient):
    async def read(self, path: str) -> None:
        assert (await self.call("read", path=path))["outcome"] == "ok"


@pytest.fixture
async def z(workspace: Path) -> AsyncIterator[Z]:
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        yield Z(s, workspace)


async def test_edit_replaces_exactly_once_and_refreshes_the_receipt(z: Z) -> None:
    (z.root / "f.py").write_text("x = 1\ny = 2\n")
    await z.read("f.py")
    r = await z.call("edit", path="f.py", old_string="x = 1", new_string="x = 10")
    assert r["outcome"] == "ok", r["text"]
    assert r["metadata"]["writtenPaths"] == ["f.py"]
    r = await z.call("edit", path="f.py", old_string="y = 2", new_string="y = 20")  # no re-read needed
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "f.py").read_text() == "x = 10\ny = 20\n"


async def test_edit_conflicts(z: Z) -> None:
    f = z.root / "f.txt"
    f.write_text("a\na\nb\n")
    r = await z.call("edit", path="f.txt", old_string="b", new_string="B")
    assert r["metadata"]["conflict"]["kind"] == "ReadRequired"
    await z.read("f.txt")
    r = await z.call("edit", path="f.txt", old_string="a", new_string="A")
    assert r["metadata"]["conflict"]["kind"] == "ContextMismatch"
    assert "matches 2 times" in r["text"]
    r = await z.call("edit", path="f.txt", old_string="zzz", new_string="A")
    assert r["metadata"]["conflict"]["kind"] == "ContextMismatch"
    r = await z.call("edit", path="f.txt", old_string="zzz", new_string="A")
    assert r["metadata"]["conflict"]["kind"] == "IdenticalReplay"
    f.write_text("a\na\nb\nc\n")
    r = await z.call("edit", path="f.txt", old_string="b", new_string="B")
    assert r["metadata"]["conflict"]["kind"] == "StaleRead"
    assert f.read_text() == "a\na\nb\nc\n"
    await z.read("f.txt")
    r = await z.call("edit", path="f.txt", old_string="a", new_string="A", replace_all=True)
    assert r["outcome"] == "ok" and r["metadata"]["replacements"] == 2
    assert f.read_text() == "A\nA\nb\nc\n"
    r = await z.call("edit", path="f.txt", old_string="a", new_string="A", replace_all=True)
    assert r["metadata"]["conflict"]["kind"] == "IdenticalReplay"


async def test_edit_keeps_crlf_bom_and_missing_final_newline(z: Z) -> None:
    f = z.root / "w.txt"
    f.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree")
    await z.read("w.txt")
    r = await z.call("edit", path="w.txt", old_string="one\ntwo", new_string="1\n2\n2b")
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"\xef\xbb\xbf1\r\n2\r\n2b\r\nthree"
    r = await z.call("edit", path="w.txt", old_string="three", new_string="3")
    assert f.read_bytes() == b"\xef\xbb\xbf1\r\n2\r\n2b\r\n3"


async def test_edit_mixed_endings_keep_untouched_terminators(z: Z) -> None:
    f = z.root / "m.txt"
    f.write_bytes(b"a\nb\r\nc\r\nd\r\n")
    await z.read("m.txt")
    r = await z.call("edit", path="m.txt", old_string="b\r\nc", new_string="B\nX\nC", replace_all=True)
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"a\nB\r\nX\r\nC\r\nd\r\n"


async def test_edit_refusals(z: Z) -> None:
    (z.root / "f.txt").write_text("a\n")
    r = await z.call("edit", path="f.txt", old_string="", new_string="x")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    r = await z.call("edit", path="f.txt", old_string="a", new_string="a")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    r = await z.call("edit", path="missing.txt", old_string="a", new_string="b")
    assert r["outcome"] == "error" and "no such file" in r["text"]
    r = await z.call("edit", path=".zuno/zuno.db", old_string="a", new_string="b")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")


async def test_delete_needs_a_receipt_and_is_not_replayed(z: Z) -> None:
    f = z.root / "gone.txt"
    f.write_text("bye\n")
    r = await z.call("delete", path="gone.txt")
    assert r["metadata"]["conflict"]["kind"] == "ReadRequired" and f.exists()
    await z.read("gone.txt")
    r = await z.call("delete", path="gone.txt")
    assert r["outcome"] == "ok" and not f.exists()
    assert r["metadata"]["deletedPaths"] == ["gone.txt"] and r["metadata"]["writtenPaths"] == []
    r = await z.call("delete", path="gone.txt")
    assert r["metadata"]["conflict"]["kind"] == "IdenticalReplay"
    (z.root / "d").mkdir()
    r = await z.call("delete", path="d")
    assert r["outcome"] == "error" and (z.root / "d").is_dir()


def test_profiles_and_editing_style(run_zuno: Any, workspace: Path) -> None:
    import json

    def names(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        proc = run_zuno("tools", "--json", *args, env=env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    zuno_tools = json.dumps(names())
    chord_edit = json.dumps(names("--profile", "chord"))
    assert '"apply_patch"' in zuno_tools and '"report_write"' in zuno_tools
    assert '"edit"' in chord_edit and '"delete"' in chord_edit
    patch_style = json.dumps(
        names(env={"ZUNO_CONFIG_CONTENT": json.dumps({"profile": "chord", "editing": {"style": "patch"}})})
    )
    assert "hidden by editing.style" in patch_style
    # edit is a registered slot in zuno: available when switched on.
    out = batch(
        run_zuno,
        [{"name": "edit", "arguments": {"path": "x", "old_string": "a", "new_string": "b"}}],
        env={"ZUNO_CONFIG_CONTENT": json.dumps({"tools": {"edit": True}})},
    )
    assert out["results"][0]["outcome"] == "error" and "no such file" in out["results"][0]["text"]
    out = batch(run_zuno, [{"name": "edit", "arguments": {"path": "x", "old_string": "a", "new_string": "b"}}])
    assert out["results"][0]["block_kind"] == "unavailable"


async def test_an_old_string_off_only_in_whitespace_is_located_and_nothing_written(z: Z) -> None:
    f = z.root / "m.py"
    body = "".join(f"x{i} = {i}\n" for i in range(30)) + "def foo():\n\treturn  1\n"
    f.write_text(body)
    await z.read("m.py")
    r = await z.call("edit", path="m.py", old_string="def foo():\n    return 1", new_string="def foo():\n    return 2")
    assert r["metadata"]["conflict"]["kind"] == "ContextMismatch", r["text"]
    assert "differs from it only in whitespace starts at line 31" in r["text"], r["text"]
    assert '"offset": 27' in r["text"]  # the read it suggests shows that area
    assert f.read_text() == body
    r = await z.call("edit", path="m.py", old_string="def bar():", new_string="def baz():")
    assert "only in whitespace" not in r["text"] and "not in the current file" in r["text"]

"""Issue 10, item 16: a trailing blank context line that stands for the file's final newline (a
habit of patch-writing models; the Codex peer retries without it) is accepted when the retry is
unambiguous, refused as ContextMismatch when it is not, and the file keeps its own final-newline
state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import zuno


def P(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


class Z:
    def __init__(self, session: Any, root: Path) -> None:
        self.s = session
        self.root = root

    async def apply(self, name: str, before: bytes, patch: str) -> dict[str, Any]:
        (self.root / name).write_bytes(before)
        res = await self.s.step([{"name": "read", "arguments": {"path": name}}])
        assert str(res.results[0].outcome) == "ok"
        res = await self.s.step([{"name": "apply_patch", "arguments": {"patch": patch}}])
        return res.results[0].to_json()


@pytest.fixture
async def z(workspace: Path) -> AsyncIterator[Z]:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        yield Z(s, workspace)


async def test_a_final_blank_context_line_is_accepted_at_the_end(z: Z) -> None:
    r = await z.apply("a.txt", b"one\ntwo\n", P("*** Update File: a.txt", "@@", " one", "-two", "+TWO", " "))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "a.txt").read_bytes() == b"one\nTWO\n"


async def test_the_file_keeps_its_missing_final_newline_and_its_crlf(z: Z) -> None:
    r = await z.apply("b.txt", b"one\ntwo", P("*** Update File: b.txt", "@@", " one", "-two", "+TWO", " "))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "b.txt").read_bytes() == b"one\nTWO"
    r = await z.apply("c.txt", b"one\r\ntwo\r\n", P("*** Update File: c.txt", "@@", "-one", " two", " "))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "c.txt").read_bytes() == b"two\r\n"


async def test_a_real_blank_line_still_matches_as_itself(z: Z) -> None:
    r = await z.apply("d.txt", b"one\n\ntwo\n", P("*** Update File: d.txt", "@@", "-one", "+ONE", " "))
    assert r["outcome"] == "ok", r["text"]
    assert (z.root / "d.txt").read_bytes() == b"ONE\n\ntwo\n"


async def test_refused_when_the_rest_does_not_end_the_file(z: Z) -> None:
    before = b"one\ntwo\nthree\n"
    r = await z.apply("e.txt", before, P("*** Update File: e.txt", "@@", " one", "-two", "+TWO", " "))
    assert r["outcome"] == "error" and r["metadata"]["conflict"]["kind"] == "ContextMismatch", r["text"]
    assert (z.root / "e.txt").read_bytes() == before


async def test_refused_when_the_retry_is_ambiguous(z: Z) -> None:
    before = b"x\ny\nx\ny\n"  # without its blank line the chunk matches twice
    r = await z.apply("f.txt", before, P("*** Update File: f.txt", "@@", " x", "-y", "+z", " "))
    assert r["outcome"] == "error" and r["metadata"]["conflict"]["kind"] == "ContextMismatch", r["text"]
    assert (z.root / "f.txt").read_bytes() == before


async def test_a_blank_removed_line_is_not_retried(z: Z) -> None:
    before = b"one\ntwo\n"
    r = await z.apply("g.txt", before, P("*** Update File: g.txt", "@@", " one", " two", "-"))
    assert r["outcome"] == "error" and r["metadata"]["conflict"]["kind"] == "ContextMismatch", r["text"]
    assert (z.root / "g.txt").read_bytes() == before

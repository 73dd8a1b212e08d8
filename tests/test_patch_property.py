"""Property: whatever patch text arrives, apply_patch settles with a typed outcome, never an
exception; and a patch that is refused or conflicts leaves the file byte for byte unchanged."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zuno

_LINES = st.sampled_from(["alpha", "beta", "gamma", "", "  indented", "delta\t", "ε unicode", "}"])
_PATCH_LINES = st.one_of(
    st.sampled_from(
        [
            "*** Update File: f.txt",
            "*** Add File: g.txt",
            "*** Delete File: f.txt",
            "*** Move to: moved/f.txt",
            "*** End of File",
            "@@",
            "@@ beta",
        ]
    ),
    _LINES.map(lambda s: " " + s),
    _LINES.map(lambda s: "-" + s),
    _LINES.map(lambda s: "+" + s),
    st.text(max_size=8),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_LINES, max_size=8),
    st.sampled_from([b"\n", b"\r\n"]),
    st.booleans(),
    st.lists(_PATCH_LINES, max_size=14),
)
def test_apply_patch_settles_typed_and_conflicts_change_nothing(
    file_lines: list[str], eol: bytes, final_newline: bool, body: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        original = eol.join(s.encode() for s in file_lines) + (eol if final_newline and file_lines else b"")
        (root / "f.txt").write_bytes(original)
        patch = "\n".join(["*** Begin Patch", *body, "*** End Patch"])

        async def go() -> dict:
            async with zuno.Runtime(root=root) as rt, rt.session() as s:
                await s.step([{"name": "read", "arguments": {"path": "f.txt"}}])
                res = await s.step([{"name": "apply_patch", "arguments": {"patch": patch}}])
                return res.results[0].to_json()

        r = asyncio.run(go())
        assert r["outcome"] in ("ok", "error", "blocked"), r
        if r["outcome"] != "ok":
            assert (root / "f.txt").read_bytes() == original
            assert not (root / "g.txt").exists() and not (root / "moved").exists()
        if r["outcome"] == "error" and "conflict" in r["metadata"]:
            c = r["metadata"]["conflict"]
            assert c["kind"] in ("ReadRequired", "StaleRead", "ContextMismatch", "IdenticalReplay")
            assert c["requiredAction"]

"""glob and grep against a directory swapped with a symlink to outside the workspace while they run:
the attack the file tools already withstand (tests/test_safe_paths.py). Known defect, not fixed
yet: rg walks by path and follows a symlink swapped in under a path it has already checked (the
search root or any directory below it), so a search can list and read files outside the workspace.
The fix needs rg confined by the kernel to the workspace (Landlock on Linux), see
docs/spec-coverage.md ("Known gaps"). The test is a strict xfail: it fails the suite once the
defect is fixed, so the mark comes off with the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import zuno
from test_safe_paths import Swapper

SECRET = "ZUNO_OUTSIDE_SECRET_4417"


@pytest.mark.xfail(strict=True, reason="known defect: rg follows a symlink swapped in mid-search (no confinement)")
async def test_a_swapped_in_symlink_never_lets_a_search_read_outside(workspace: Path) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "seed.txt").write_text("seed\n")
    os.symlink(outside, workspace / "l")
    swapper = Swapper(workspace / "d", workspace / "l")
    swapper.start()
    leaked: list[str] = []
    try:
        async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
            for i in range(600):  # ~4% of calls leaked when this was written: it stops at the first
                call = (
                    {"name": "grep", "arguments": {"pattern": SECRET, "path": "d"}}
                    if i % 2
                    else {"name": "glob", "arguments": {"pattern": "*.txt", "path": "d"}}
                )
                rec = (await s.step([call])).results[0]
                if SECRET in rec.text or "secret.txt" in rec.text:
                    leaked.append(rec.text)
                    break
    finally:
        swapper.stop.set()
        swapper.join(10)
    assert swapper.swaps > 100, "the swapper barely ran; the race did not happen"
    assert leaked == [], f"a search read outside the workspace: {leaked[0][:200]}"

"""The mutation lock holds across processes: a patch waits while another process holds it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import zuno

HOLDER = r"""
import fcntl, os, sys
from pathlib import Path
d = Path(sys.argv[1]) / ".zuno" / "locks"
d.mkdir(parents=True, exist_ok=True)
fd = os.open(d / "mutation.lock", os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()           # hold until told to let go
Path(sys.argv[2]).write_text("released")
os.close(fd)
"""

PATCH = "*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+b\n*** End Patch"


def test_a_patch_waits_for_another_process_holding_the_mutation_lock(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "released"
    (workspace / "f.txt").write_text("a\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workspace), str(marker)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        async def drive() -> zuno.StepResult:
            async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
                await s.step([{"name": "read", "arguments": {"path": "f.txt"}}])
                step = asyncio.create_task(s.step([{"name": "apply_patch", "arguments": {"patch": PATCH}}]))
                await asyncio.sleep(0.3)
                assert not step.done()  # waiting on the other process
                assert (workspace / "f.txt").read_text() == "a\n"
                assert holder.stdin is not None
                holder.stdin.write("go\n")
                holder.stdin.flush()
                return await asyncio.wait_for(step, 60)

        res = asyncio.run(drive())
        assert res.results[0].outcome == "ok", res.results[0].text
        assert marker.exists()  # the patch completed only after the holder let go
        assert (workspace / "f.txt").read_text() == "b\n"
    finally:
        holder.kill()
        holder.wait()

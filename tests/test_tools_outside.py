"""Outside testing of the action tools (ninth round): shell, bg / the chord job tools, apply_patch,
edit, write and read, driven the way models and users drive them (``zuno steps``, ``zuno call``).
Each test here failed before the fix it names."""

from __future__ import annotations

import time
from pathlib import Path

from zuno.process import procfs

from jobhelp import Steps, call


def test_a_job_lost_with_its_process_reports_the_bytes_its_log_holds(workspace: Path) -> None:
    """kill -9 of the process holding a job: the next process records it lost, and says how much
    output it left (the log's size), not the 0 of a row nobody finished."""
    with Steps(workspace) as z:
        res = z.one("shell", command="printf 'hello\\nworld\\n'; sleep 60", run_in_background=True)
        bg = res["metadata"]["background"]
        log = workspace / res["metadata"]["logPath"]
        session = z.step()["session"]
        deadline = time.monotonic() + 20
        while (not log.exists() or log.stat().st_size < 12) and time.monotonic() < deadline:
            time.sleep(0.02)
        z.proc.kill()
        z.proc.wait()
    deadline = time.monotonic() + 20
    while procfs.group_exists(bg["pgid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    with Steps(workspace, "--session", session) as z:
        first = z.step(call("bg", action="list"))
        z.close()
    notice = next(n for n in first["notices"] if n["kind"] == "job_completed")
    assert notice["status"] == "lost" and notice["totalWritten"] == 12
    assert "; 12 bytes of output in" in notice["text"]
    listed = first["results"][0]
    assert "12 bytes" in listed["text"]
    assert {m["taskID"]: m["total_written"] for m in listed["metadata"]["jobs"]}[bg["taskID"]] == 12

"""A background job whose command starts a daemon that leaves the process group (outside testing,
eleventh round).

Before: ``setsid sh -c 'while :; do echo tick; sleep 0.1; done' &`` kept writing into the job's
log after the job was recorded complete: the log, and ``bg output`` of a finished job, grew without
end, past the ``totalWritten`` the job's row recorded. Now the job's output is final when the job
settles: Zuno, which writes the log from the pipe it reads, stops reading and closes its end, so
the daemon's next write fails (EPIPE / SIGPIPE); the log, the row and every later read agree, and
the result names the process that still held the output. A daemon whose output goes to a file of
its own is not touched.

Real processes: the daemon's pid is written by the daemon itself and killed at teardown whatever
the test found.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import zuno
from zuno.jobs import JobManager
from zuno.process import procfs

from jobhelp import alive


def _pid_from(path: Path, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text().split()[0])
        time.sleep(0.01)
    raise AssertionError(f"the daemon never wrote its pid to {path}")


def _ended(pid: int, timeout: float = 20) -> bool:
    """Wait (bounded) until pid is gone or a zombie."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def daemons() -> Iterator[list[Path]]:
    """Pid files of the daemons a test starts: each is killed at teardown if it still runs."""
    files: list[Path] = []
    yield files
    for f in files:
        with contextlib.suppress(OSError, ValueError):
            pid = int(f.read_text().split()[0])
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_setsid_daemon_cannot_grow_a_finished_jobs_output(
    workspace: Path, tmp_path: Path, daemons: list[Path]
) -> None:
    pidfile = tmp_path / "daemon.pid"
    daemons.append(pidfile)
    command = (
        f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo tick; sleep 0.1; done' & "
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done; echo started"
    )
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        r = await s.step([{"name": "shell", "arguments": {"command": command, "run_in_background": True}}])
        job_id = r.results[0].metadata["background"]["taskID"]
        pid = _pid_from(pidfile)
        assert procfs.stat(pid) is not None and procfs.stat(pid)[0] != r.results[0].metadata["background"]["pgid"]
        waited = await s.step([{"name": "bg", "arguments": {"action": "wait", "taskID": job_id}}])
        (w,) = waited.results
        assert w.metadata["status"] == "completed", w.text
        (row,) = rt.store.query("SELECT total_written, log_path FROM jobs WHERE id = ?", (job_id,))
        recorded, log = row["total_written"], Path(row["log_path"])
        # Zuno closed its end of the pipe: the daemon's next write killed it (SIGPIPE).
        assert _ended(pid), f"daemon {pid} still runs: its output pipe was not closed"
        # Final: the log, the row, and a later read agree, once nothing can write any more.
        assert log.stat().st_size == recorded
        assert b"started\n" in log.read_bytes()
        # The daemon is named, as a process that left the group and still held the output.
        (row,) = rt.store.query("SELECT capture_cut FROM jobs WHERE id = ?", (job_id,))
        holders = json.loads(row["capture_cut"])
        assert pid in [p for p, _name in holders], (pid, holders)
        assert f"{pid} (sh)" in w.text and "EPIPE / SIGPIPE" in w.text, w.text
        assert w.metadata["outputCut"]["holders"][0]["pid"] in [p for p, _ in holders]
        out = await s.step([{"name": "bg", "arguments": {"action": "output", "taskID": job_id}}])
        assert out.results[0].metadata["totalWritten"] == recorded, out.results[0].metadata
        jm = JobManager.for_session(s)
        assert jm.jobs[job_id].running.total_written == recorded
    # A later process reads the same final output from the row and the log.
    async with zuno.Runtime(root=workspace) as rt, rt.session(s.id) as s2:
        later = await s2.step([{"name": "bg", "arguments": {"action": "output", "taskID": job_id}}])
        (o,) = later.results
        assert o.metadata["totalWritten"] == recorded and f"{pid} (sh)" in o.text, o.text


async def test_the_completion_notice_names_the_daemon_that_held_the_output(
    workspace: Path, tmp_path: Path, daemons: list[Path]
) -> None:
    pidfile = tmp_path / "daemon.pid"
    daemons.append(pidfile)
    command = f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo tick; sleep 0.1; done' & echo started"
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        r = await s.step([{"name": "shell", "arguments": {"command": command, "run_in_background": True}}])
        job_id = r.results[0].metadata["background"]["taskID"]
        job = JobManager.for_session(s).jobs[job_id]
        await job.finished.wait()
        pid = _pid_from(pidfile)
        notices = (await s.step([{"name": "read", "arguments": {"path": "."}}])).notices
        (done,) = [n for n in notices if n["kind"] == "job_completed"]
        assert "its output is final as recorded" in done["text"] and f"{pid} (sh)" in done["text"], done["text"]
        assert _ended(pid)
        (row,) = rt.store.query("SELECT total_written, log_path FROM jobs WHERE id = ?", (job_id,))
        assert Path(row["log_path"]).stat().st_size == row["total_written"]


async def test_a_daemon_with_its_own_output_file_is_left_alone(
    workspace: Path, tmp_path: Path, daemons: list[Path]
) -> None:
    pidfile, own = tmp_path / "daemon.pid", tmp_path / "daemon.out"
    daemons.append(pidfile)
    command = (
        f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo tick; sleep 0.1; done' > {own} 2>&1 < /dev/null & "
        "echo started"
    )
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        r = await s.step([{"name": "shell", "arguments": {"command": command, "run_in_background": True}}])
        job_id = r.results[0].metadata["background"]["taskID"]
        waited = await s.step([{"name": "bg", "arguments": {"action": "wait", "taskID": job_id}}])
        (w,) = waited.results
        assert "outputCut" not in w.metadata and "final as recorded" not in w.text, w.text
        (row,) = rt.store.query("SELECT total_written, capture_cut FROM jobs WHERE id = ?", (job_id,))
        assert row["capture_cut"] is None and row["total_written"] == len(b"started\n")
        pid = _pid_from(pidfile)
        grew = own.stat().st_size
        deadline = time.monotonic() + 20
        while own.stat().st_size == grew and time.monotonic() < deadline:
            time.sleep(0.02)
        assert own.stat().st_size > grew and alive(pid)  # still running, still writing its own file

"""Outside testing of shell and background execution (tenth round), driven through ``zuno steps``
and ``zuno call`` with real subprocesses. Each test here failed before the fix it names."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import RunZuno
from jobhelp import Steps, alive

HUGE = 10**400  # JSON has no integer limit, and pydantic takes it as an int


def test_a_wait_timeout_too_large_for_a_float_is_capped_not_an_internal_error(workspace: Path) -> None:
    """bg wait / job_output with a timeout_ms too large for a float divided it before capping it:
    OverflowError, "failed inside the tool"; now it is capped like any timeout over the maximum."""
    gate = workspace / "gate"
    with Steps(workspace) as z:
        started = z.one("shell", command="echo hi; while [ ! -e gate ]; do sleep 0.02; done", run_in_background=True)
        task = started["metadata"]["background"]["taskID"]
        gate.touch()  # the job ends on its own: the wait returns at its end, not at the cap
        waited = z.one("bg", action="wait", taskID=task, timeout_ms=HUGE)
        assert waited["outcome"] == "ok", waited["text"]
        assert waited["metadata"]["status"] == "completed" and "hi" in waited["text"]
        z.close()
    gate.unlink()
    with Steps(workspace, "--profile", "chord") as z:
        started = z.one("shell", command="echo hi; while [ ! -e gate ]; do sleep 0.02; done", run_in_background=True)
        task = started["metadata"]["background"]["taskID"]
        gate.touch()
        out = z.one("job_output", job_id=task, wait="exit", timeout_ms=HUGE)
        assert out["outcome"] == "ok", out["text"]
        assert "hi" in out["text"] and "[status: completed" in out["text"], out["text"]
        z.close()


def test_an_environment_name_no_program_can_be_given_is_refused_naming_it(workspace: Path, run_zuno: RunZuno) -> None:
    """shell.env (or a hook) with a name holding '=' or an empty name reached the guard, which
    failed with exit 125 "illegal environment variable name" naming nothing; now it is refused
    before anything runs, naming the variable, like a NUL in a value."""
    for name in ("A=B", ""):
        (workspace / "zuno.json").write_text(json.dumps({"shell": {"env": {name: "x"}}}))
        marker = workspace / "ran"
        res = run_zuno("call", "shell", json.dumps({"command": "touch ran"}))
        assert "[blocked: invalid_arguments]" in res.stdout, res.stdout + res.stderr
        assert f"the environment variable name {json.dumps(name)}" in res.stdout, res.stdout
        assert "Fix the name" in res.stdout and "zuno-guard: 125" not in res.stdout
        assert not marker.exists()


def test_a_job_whose_command_exited_is_named_by_the_stop_that_ended_its_group(
    workspace: Path, run_zuno: RunZuno
) -> None:
    """A job whose own process had exited while members of its group still ran (`sleep 30 & exit 3`)
    kept the status of that exit when bg cancel, its deadline or the session's end stopped those
    members: "cancelled: …" said `failed`, and `zuno call` said "was stopped (status: completed)"."""
    with Steps(workspace) as z:
        res = z.one("shell", command="sleep 30 & echo $! > m1; exit 3", run_in_background=True)
        task = res["metadata"]["background"]["taskID"]
        z.one("bg", action="output", taskID=task)
        deadline = time.monotonic() + 20
        while not (workspace / "m1").exists() or not (workspace / "m1").read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        cancelled = z.one("bg", action="cancel", taskID=task)
        assert cancelled["metadata"]["groupExited"] is True, cancelled["text"]
        assert cancelled["metadata"]["status"] == "cancelled", cancelled["text"]
        timed = z.one("shell", command="sleep 30 & exit 0", yield_time_ms=0, timeout_ms=300)
        task = timed["metadata"]["background"]["taskID"]
        waited = z.one("bg", action="wait", taskID=task)
        assert waited["metadata"]["status"] == "timed_out", waited["text"]
        listed = {j["taskID"]: j["status"] for j in z.one("bg", action="list")["metadata"]["jobs"]}
        assert listed[task] == "timed_out"
        z.close()
    member = int((workspace / "m1").read_text())
    assert not alive(member)  # the cancel did stop the member it now names
    res = run_zuno("call", "shell", json.dumps({"command": "sleep 30 & echo hi", "yield_time_ms": 0}))
    assert "so it was stopped (status: stopped)" in res.stderr, res.stderr

"""Background execution through the real shell tool, end to end over `zuno steps`:
promotion by time and by a lingering group member, run_in_background, the non-promotable cap,
the chord profile's job tools on a shell job, and 100 shell jobs leaving no survivor."""

from __future__ import annotations

import json
import time
from pathlib import Path

from zuno import limits
from zuno.process import procfs

from jobhelp import Steps, alive, call, wait_pids


def test_promotion_by_time(workspace: Path) -> None:
    with Steps(workspace) as z:
        res = z.one("shell", command="echo a; ls >/dev/null; sleep 1; echo b", yield_time_ms=200)
        bg = res["metadata"]["background"]
        assert bg["promotedBecause"] == "yield_time_ms" and bg["status"] == "running"
        assert "background job" in res["text"] and bg["taskID"] in res["text"]
        step = z.step(call("bg", action="wait", taskID=bg["taskID"]))
        z.close()
    waited = step["results"][0]
    assert waited["metadata"]["status"] == "completed" and "]\na\nb\n" in waited["text"]
    # delivered once: here (the usual case), or as this step's notice if the machine stalled past its end
    noticed = [n for n in step["notices"] if n.get("taskID") == bg["taskID"]]
    assert waited["metadata"]["completion"]["deliveredHere"] is not bool(noticed)


def test_promotion_by_a_lingering_group_member_even_with_yield_zero(workspace: Path) -> None:
    pids = workspace / "pids"
    with Steps(workspace) as z:
        res = z.one("shell", command=f"(sleep 0.8; echo late) & echo $! > {pids}; echo early", yield_time_ms=0)
        bg = res["metadata"]["background"]
        assert bg["promotedBecause"] == "group members still running after the command exited"
        assert bg["commandExited"] is True and bg["status"] == "running"
        member = int(pids.read_text())
        assert alive(member)
        out = z.one("bg", action="wait", taskID=bg["taskID"])
        z.close()
    assert out["metadata"]["status"] == "completed" and "]\nearly\nlate\n" in out["text"]
    assert not alive(member)


def test_run_in_background_and_completion_notice(workspace: Path) -> None:
    with Steps(workspace) as z:
        res = z.one(
            "shell",
            command="ls >/dev/null; sleep 0.3; echo bg-done",
            run_in_background=True,
            backgroundPurpose="remoteObserver",
        )
        bg = res["metadata"]["background"]
        assert bg["promotedBecause"] == "run_in_background" and bg["backgroundPurpose"] == "remoteObserver"
        deadline = time.monotonic() + 20
        notices: list[dict] = []
        while time.monotonic() < deadline and not notices:
            time.sleep(0.1)
            notices = [n for n in z.step()["notices"] if n["kind"] == "job_completed"]
        again = z.step()
        z.close()
    assert len(notices) == 1 and notices[0]["taskID"] == bg["taskID"] and notices[0]["status"] == "completed"
    assert "remoteObserver" in notices[0]["text"]
    assert not [n for n in again["notices"] if n["kind"] == "job_completed"]


def test_a_command_that_cannot_be_promoted_keeps_the_foreground_cap(workspace: Path) -> None:
    with Steps(workspace) as z:
        res = z.one("shell", command="sleep 0.6; echo waited", yield_time_ms=100, timeout_ms=0)
        unparsable = z.one("shell", command="sleep 0.6; echo 'oops", yield_time_ms=100, timeout_ms=0)
        z.close()
    assert "background" not in res["metadata"]  # deliberate waiting is never promoted
    assert res["metadata"]["exitCode"] == 0 and "waited" in res["text"]
    assert res["metadata"]["timeoutMs"] == limits.SHELL_TIMEOUT_DEFAULT_MS  # timeout_ms 0 did not lift the cap
    assert "background" not in unparsable["metadata"]
    assert unparsable["metadata"]["timeoutMs"] == limits.SHELL_TIMEOUT_DEFAULT_MS


def test_shell_job_through_the_chord_job_tools(workspace: Path) -> None:
    (workspace / "zuno.json").write_text(json.dumps({"profile": "chord"}))
    with Steps(workspace) as z:
        res = z.one(
            "shell", command="printf '\\033[1mbold\\033[0m\\n'; ls >/dev/null; sleep 30", run_in_background=True
        )
        job = res["metadata"]["background"]["job_id"]
        assert f'job_output (job_id "{job}"' in res["text"] and "bg (action" not in res["text"]
        first = z.one("job_output", job_id=job, wait="output", timeout_ms=10_000)
        killed = z.one("job_kill", job_id=job, reason="test over")
        z.close()
    assert first["text"].startswith("bold\n") and "[status: running" in first["text"]
    assert killed["metadata"]["groupExited"] is True and "[status: killed" in killed["text"]


def test_stress_100_shell_jobs_with_grandchildren_leave_no_survivor(workspace: Path) -> None:
    n, third = 100, 33
    pids = workspace / "pids"
    cmd = f"sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); bash -c 'sleep 60' & wait"
    with Steps(workspace) as z:
        calls = [
            call("shell", command=cmd, run_in_background=True, **({"timeout_ms": 500} if i < third else {}))
            for i in range(n)
        ]
        res = z.step(*calls)
        started = [r["metadata"]["background"] for r in res["results"]]
        assert len(started) == n
        members = wait_pids(pids, 2 * n, timeout=60)
        cancels = z.step(*[call("bg", action="cancel", taskID=s["taskID"]) for s in started[third : 2 * third]])
        assert all(r["metadata"]["groupExited"] for r in cancels["results"])
        deadline = time.monotonic() + 30
        while True:
            statuses = {m["taskID"]: m["status"] for m in z.one("bg", action="list")["metadata"]["jobs"]}
            if all(statuses[s["taskID"]] != "running" for s in started[:third]) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [statuses[s["taskID"]] for s in started[:third]] == ["timed_out"] * third
        assert [statuses[s["taskID"]] for s in started[third : 2 * third]] == ["cancelled"] * third
        assert all(statuses[s["taskID"]] == "running" for s in started[2 * third :])
        assert z.close(timeout=120) == 0  # the rest are abandoned at process exit
    assert not [p for p in members if alive(p)]
    assert not [s["pgid"] for s in started if procfs.group_exists(s["pgid"])]


def test_kill_9_of_the_steps_process_leaves_no_survivor_and_the_job_is_recorded_lost(workspace: Path) -> None:
    pids = workspace / "pids"
    cmd = f"sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); wait"
    with Steps(workspace) as z:
        res = z.one("shell", command=cmd, run_in_background=True)
        bg = res["metadata"]["background"]
        session = z.step()["session"]
        members = wait_pids(pids, 2)
        z.proc.kill()
        z.proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (any(alive(p) for p in members) or procfs.group_exists(bg["pgid"])):
        time.sleep(0.05)
    assert not any(alive(p) for p in members) and not procfs.group_exists(bg["pgid"])
    with Steps(workspace, "--session", session) as z:
        first = z.step(call("bg", action="list"))
        nxt = z.step()
        z.close()
    listed = first["results"][0]
    assert {m["taskID"]: m["status"] for m in listed["metadata"]["jobs"]}[bg["taskID"]] == "lost"
    got = [n for n in first["notices"] if n["kind"] == "job_completed"]  # reported in the first step
    assert not [n for n in nxt["notices"] if n["kind"] == "job_completed"]
    assert len(got) == 1 and got[0]["taskID"] == bg["taskID"] and "killed when the process" in got[0]["text"]

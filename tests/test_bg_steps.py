"""End to end through `zuno steps`: background jobs across steps of one process, bg windows,
the chord job tools, polling refusal, and the stress test of 100 jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from zuno import limits
from zuno.process import procfs

from jobhelp import Steps, alive, call, install_extension, wait_pids


def test_steps_one_session_one_process_and_bad_lines(run_zuno: Any, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    text = (
        json.dumps([call("read", path="a.txt")])
        + "\n\nnot json\n"
        + json.dumps({"no": 1})
        + "\n"
        + json.dumps([call("read", path="a.txt")])
        + "\n"
    )
    proc = run_zuno("steps", "-", input=text)
    assert proc.returncode == 1  # some lines were unusable; the others ran (docs/cli.md)
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o.get("step") for o in out] == [1, None, None, 2]
    assert out[0]["session"] == out[3]["session"]
    assert out[1]["line"] == 3 and "not valid JSON" in out[1]["error"]
    assert out[2]["line"] == 4 and "array" in out[2]["error"]
    assert all("\n" not in line for line in proc.stdout.splitlines())
    f = workspace / "steps.jsonl"
    f.write_text(json.dumps([call("read", path="a.txt")]) + "\n")
    proc = run_zuno("steps", str(f))
    assert proc.returncode == 0 and json.loads(proc.stdout)["step"] == 1


def test_background_job_lives_across_steps_and_ends_with_the_process(workspace: Path) -> None:
    install_extension(workspace)
    pids = workspace / "pids"
    script = f"echo started; sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); wait"
    with Steps(workspace) as z:
        started = z.one("bgstart", script=script, purpose="remoteObserver")
        assert started["outcome"] == "ok", started["text"]
        job = started["metadata"]["background"]
        assert job["status"] == "running" and job["backgroundPurpose"] == "remoteObserver"
        members = wait_pids(pids, 2)
        listed = z.one("bg", action="list")
        assert job["taskID"] in listed["text"] and "running" in listed["text"] and "remoteObserver" in listed["text"]
        out = z.one("bg", action="output", taskID=job["taskID"])
        assert "started" in out["text"] and out["metadata"]["status"] == "running"
        assert all(alive(p) for p in members)
        session = out["metadata"] and z.step()["session"]
        assert z.close() == 0
    # the process ended: the group was stopped and its end recorded
    assert not any(alive(p) for p in members)
    assert not procfs.group_exists(job["pgid"])
    with Steps(workspace, "--session", session) as z:
        first, second = z.step(), z.step()
        z.close()
    got = [n for n in first["notices"] if n["kind"] == "job_completed"]
    assert len(got) == 1 and got[0]["status"] == "stopped" and got[0]["backgroundPurpose"] == "remoteObserver"
    assert not [n for n in second["notices"] if n["kind"] == "job_completed"]


def test_bg_windows_across_the_memory_boundary(workspace: Path) -> None:
    install_extension(workspace)
    size = limits.PROCESS_MEMORY_TAIL + limits.PROCESS_READ_CHUNK + 300_000
    total = size + 5
    with Steps(workspace) as z:
        task = z.one("bgstart", script=f"head -c {size} /dev/zero | tr '\\0' 'x'; echo; echo END")["metadata"][
            "background"
        ]["taskID"]
        step = z.step(call("bg", action="wait", taskID=task))
        waited = step["results"][0]
        noticed = [n for n in step["notices"] if n.get("taskID") == task]
        # exactly once: inline here, or (the job ended before this step began) as the step's notice
        assert waited["metadata"]["completion"]["deliveredHere"] is not bool(noticed)
        newest = z.one("bg", action="output", taskID=task)
        # memory holds at least the most recent 2 MiB (and at most one read chunk more)
        mem_from = newest["metadata"]["memoryFrom"]
        assert (
            total - limits.PROCESS_MEMORY_TAIL - limits.PROCESS_READ_CHUNK
            <= mem_from
            <= total - limits.PROCESS_MEMORY_TAIL
        )
        oldest = z.one("bg", action="output", taskID=task, cursor=0, limit=100_000)
        straddle = z.one("bg", action="output", taskID=task, cursor=mem_from - 10, limit=20)
        inmem = z.one("bg", action="output", taskID=task, cursor=mem_from, limit=20)
        back = z.one("bg", action="output", taskID=task, cursor=newest["metadata"]["windowFrom"] - 16384)
        z.close()
    m = newest["metadata"]
    assert m["cursor"] == total and m["totalWritten"] == total and not m["hasMore"]
    assert m["windowFrom"] == total - limits.WINDOW_DEFAULT_LIMIT and m["hasEarlier"] and m["fromDisk"] is False
    assert "x\nEND\n" in newest["text"] and "[completion already delivered by " in newest["text"]
    m = oldest["metadata"]
    assert m["windowFrom"] == 0 and not m["hasEarlier"] and m["cursor"] == limits.WINDOW_MAX_LIMIT
    assert m["hasMore"] and m["fromDisk"] is True and m["limit"] == limits.WINDOW_MAX_LIMIT
    assert straddle["metadata"]["fromDisk"] is True and inmem["metadata"]["fromDisk"] is False
    assert straddle["metadata"]["cursor"] == inmem["metadata"]["windowFrom"] + 10
    assert back["metadata"]["cursor"] == newest["metadata"]["windowFrom"] and back["metadata"]["fromDisk"] is False


def test_job_tools_in_the_chord_profile(workspace: Path) -> None:
    install_extension(workspace, profile="chord")
    script = "printf '\\033[31mred\\033[0m \\033]0;title\\007plain\\n'; sleep 30"
    with Steps(workspace) as z:
        job = z.one("bgstart", script=script)["metadata"]["background"]["job_id"]
        res = [z.one("job_output", job_id=job, wait="output", timeout_ms=10_000)]
        res.append(z.one("job_output", job_id=job))  # empty read 1
        res.append(z.one("job_output", job_id=job))  # empty read 2: flagged as polling
        res.append(z.one("job_output", job_id=job, wait="exit", timeout_ms=200))  # timed out: not an error
        res.append(z.one("job_output", job_id=job))
        res.append(z.one("job_output", job_id=job))
        res.append(z.one("job_output", job_id=job))
        res.append(z.one("job_output", job_id=job))  # refused
        res.append(z.one("job_list"))
        res.append(z.one("job_kill", job_id=job, reason="done with it"))
        res.append(z.one("job_list"))
        res.append(z.one("job_list", include_finished=True))
        res.append(z.one("job_output", job_id=job))
        z.close()
    first = res[0]
    assert first["outcome"] == "ok"
    assert first["text"].startswith("red plain\n") and "\x1b" not in first["text"] and "title" not in first["text"]
    assert "[status: running" in first["text"]
    assert "(no new output)" in res[1]["text"] and "polling" not in res[1]["text"]
    assert "[notice] polling" in res[2]["text"] and res[2]["outcome"] == "ok"
    assert res[3]["outcome"] == "ok" and "[notice] the exit wait timed out" in res[3]["text"]
    assert "quiet for" in res[3]["text"] and "[status: running" in res[3]["text"]
    assert res[6]["outcome"] == "ok" and "polling" in res[6]["text"]
    assert res[7]["outcome"] == "blocked" and "polling" in res[7]["text"]
    assert job in res[8]["text"] and "running" in res[8]["text"] and "deadline" in res[8]["text"]
    assert res[9]["outcome"] == "ok" and "stopped" in res[9]["text"]
    assert res[9]["metadata"]["groupExited"] is True and res[9]["metadata"]["reason"] == "done with it"
    assert res[10]["text"].startswith("No active jobs")
    assert job in res[11]["text"] and "killed" in res[11]["text"]
    assert "[status: killed" in res[12]["text"]


def test_output_over_16_kib_is_a_preview_and_the_log_path(workspace: Path) -> None:
    install_extension(workspace, profile="chord")
    with Steps(workspace) as z:
        started = z.one("bgstart", script="head -c 100000 /dev/zero | tr '\\0' 'y'; echo; echo TAIL; sleep 0.3")
        job = started["metadata"]["background"]["job_id"]
        step = z.step(call("job_output", job_id=job, wait="exit", timeout_ms=20_000))
        done = step["results"][0]
        again = z.one("job_output", job_id=job)
        z.close()
    log = started["metadata"]["background"]["logPath"]
    assert Path(log).stat().st_size == 100_006
    assert "over 16384" in done["text"] and Path(log).relative_to(workspace).as_posix() in done["text"]
    assert done["text"].count("y") < 4096 and "TAIL" in done["text"]
    assert "[status: completed" in done["text"]
    noticed = [n for n in step["notices"] if n.get("job_id") == job]
    assert done["metadata"]["completion"]["deliveredHere"] is not bool(noticed)
    assert "(no new output)" in again["text"]


def test_stress_100_jobs_cancelled_timed_out_abandoned_leave_no_survivor(workspace: Path) -> None:
    n, third = 100, 33
    install_extension(workspace)
    pids = workspace / "pids"
    script = f"sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); bash -c 'sleep 60' & wait"
    with Steps(workspace) as z:
        res = z.step(*[call("bgstart", script=script, timeout_s=0.5 if i < third else 0) for i in range(n)])
        started = [r["metadata"]["background"] for r in res["results"]]
        assert len(started) == n and all(s["status"] == "running" for s in started)
        members = wait_pids(pids, 2 * n, timeout=60)
        cancels = z.step(*[call("bg", action="cancel", taskID=s["taskID"]) for s in started[third : 2 * third]])
        assert all(r["metadata"]["groupExited"] for r in cancels["results"]), cancels
        listed = z.one("bg", action="list")
        statuses = {m["taskID"]: m["status"] for m in listed["metadata"]["jobs"]}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(statuses[s["taskID"]] == "running" for s in started[:third]):
            time.sleep(0.2)
            listed = z.one("bg", action="list")
            statuses = {m["taskID"]: m["status"] for m in listed["metadata"]["jobs"]}
        assert [statuses[s["taskID"]] for s in started[:third]] == ["timed_out"] * third
        assert [statuses[s["taskID"]] for s in started[third : 2 * third]] == ["cancelled"] * third
        assert all(statuses[s["taskID"]] == "running" for s in started[2 * third :])
        assert z.close(timeout=120) == 0  # the rest are abandoned at process exit
    assert not [p for p in members if alive(p)]
    assert not [s["pgid"] for s in started if procfs.group_exists(s["pgid"])]


def test_sigterm_ends_the_steps_process_and_its_jobs(workspace: Path) -> None:
    install_extension(workspace)
    pids = workspace / "pids"
    with Steps(workspace) as z:
        started = z.one("bgstart", script=f"sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); wait")
        task = started["metadata"]["background"]["taskID"]
        session = z.step()["session"]
        members = wait_pids(pids, 2)
        z.proc.terminate()  # SIGTERM while it waits for input
        assert z.proc.wait(60) == 143  # terminated (docs/cli.md)
    assert not any(alive(p) for p in members)
    with Steps(workspace, "--session", session) as z:
        listed = z.one("bg", action="list")
        z.close()
    assert {m["taskID"]: m["status"] for m in listed["metadata"]["jobs"]}[task] == "stopped"

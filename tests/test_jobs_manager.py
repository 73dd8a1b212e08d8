"""Background jobs through the Python API: promotion, completion exactly once, deadlines, group truth."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from zuno import Runtime
from zuno.declarations import Effect
from zuno.jobs import PROMOTED_LINGERING, PROMOTED_YIELD, JobManager
from zuno.process import CommandSpec, start
from zuno.tools.bg import BgArgs, BgTool

from jobhelp import alive, call, start_job, wait_pids


def notices_of(result, kind: str = "job_completed") -> list[dict]:  # type: ignore[no-untyped-def]
    return [n for n in result.notices if n["kind"] == kind]


async def test_bg_wait_delivers_the_completion_inline_once(workspace: Path) -> None:
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, "sleep 0.2; echo finished")
        res = await s.step([call("bg", action="wait", taskID=job.id)])
        rec = res.results[0]
        assert rec.outcome == "ok", rec.text
        assert rec.metadata["status"] == "completed"
        assert rec.metadata["completion"]["deliveredHere"] is True
        assert "finished" in rec.text and "completion delivered here" in rec.text
        res = await s.step([call("bg", action="output", taskID=job.id)])
        assert res.results[0].metadata["completion"]["deliveredHere"] is False
        assert not notices_of(res)


async def test_callback_is_a_notice_in_the_next_step_once(workspace: Path) -> None:
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, "echo quick", purpose="remoteObserver")
        await asyncio.wait_for(job.finished.wait(), 20)
        res = await s.step([call("bg", action="list")])
        got = notices_of(res)
        assert len(got) == 1 and got[0]["job_id"] == job.id and got[0]["status"] == "completed"
        assert got[0]["backgroundPurpose"] == "remoteObserver" and "remoteObserver" in got[0]["text"]
        assert "remoteObserver" in res.results[0].text
        res = await s.step([call("bg", action="output", taskID=job.id)])
        assert not notices_of(res)
        assert res.results[0].metadata["completion"] == {
            "deliveredHere": False,
            "how": "already delivered by the callback (a notice)",
        }
        assert "backgroundPurpose remoteObserver" in res.results[0].text


async def test_an_inline_read_supersedes_a_queued_callback(workspace: Path) -> None:
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, "echo done")
        await asyncio.wait_for(job.finished.wait(), 20)
        queued = rt.store.query("SELECT completion_state FROM jobs WHERE id = ?", (job.id,))[0][0]
        assert queued == "queued"
        # A read in the step during which the job ended (its notice is still unconsumed) takes it:
        jm = JobManager.for_session(s)
        assert jm.claim_completion(job.id, "bg output") == (True, "bg output")
        assert jm.claim_completion(job.id, "bg wait") == (False, "already delivered by bg output")
        res = await s.step([call("bg", action="output", taskID=job.id)])
        assert not notices_of(res)  # the withdrawn notice never arrives
        assert res.results[0].metadata["completion"] == {
            "deliveredHere": False,
            "how": "already delivered by bg output",
        }


async def test_exactly_once_under_a_race_between_wait_and_callback(workspace: Path) -> None:
    n = 24
    async with Runtime(root=workspace) as rt, rt.session() as s:
        jobs = [await start_job(s, f"sleep 0.{(i * 7) % 10}{i % 3}") for i in range(n)]
        # every wait races its job's own completion callback
        res = await s.step([call("bg", action="wait", taskID=j.id) for j in jobs])
        inline = {r.metadata["taskID"] for r in res.results if r.metadata.get("completion", {}).get("deliveredHere")}
        for j in jobs:
            await asyncio.wait_for(j.finished.wait(), 20)
        later = await s.step([call("bg", action="list")])
        later2 = await s.step([call("bg", action="list")])
        noticed = [x["job_id"] for x in notices_of(later) + notices_of(later2) + notices_of(res)]
        assert len(noticed) == len(set(noticed))
        assert set(noticed) | inline == {j.id for j in jobs}
        assert not (set(noticed) & inline)
        rows = rt.store.query("SELECT completion_state FROM jobs")
        assert {r[0] for r in rows} <= {"delivered", "queued"}
    # a direct race of the two owners, many times: one winner each
    async with Runtime(root=workspace) as rt, rt.session() as s:
        jm = JobManager.for_session(s)
        for _ in range(30):
            job = await start_job(s, "true")
            await asyncio.wait_for(job.finished.wait(), 20)
            # the callback queued; now a claim and a step's notice delivery race in threads
            n = rt.store.begin_step(s.id)
            claims = await asyncio.gather(
                asyncio.to_thread(jm.claim_completion, job.id, "bg wait"),
                asyncio.to_thread(rt.store.take_notices, s.id, n),
            )
            rt.store.end_step(s.id, n)
            claimed = claims[0][0]
            delivered = [x for x in claims[1] if x.get("job_id") == job.id]
            assert claimed != bool(delivered), (claims, delivered)
            n = rt.store.begin_step(s.id)
            assert not [x for x in rt.store.take_notices(s.id, n) if x.get("job_id") == job.id]
            rt.store.end_step(s.id, n)


async def test_promotion_by_time_adopt(workspace: Path) -> None:
    async with Runtime(root=workspace) as rt, rt.session() as s:
        jm = JobManager.for_session(s)
        running = await start(
            CommandSpec(["bash", "-c", "echo begin; sleep 0.6; echo end"], workspace, dict(os.environ), jm.log_dir)
        )
        assert await running.wait(0.1) is None  # still running past the (test's) yield time
        job = jm.adopt(running, label="slow", call_seq=None, promoted_because=PROMOTED_YIELD)
        out = job.started_output()
        assert job.id in out.head and PROMOTED_YIELD in out.head
        res = await s.step([call("bg", action="wait", taskID=job.id)])
        assert res.results[0].metadata["status"] == "completed"
        assert "]\nbegin\nend\n" in res.results[0].text


async def test_promotion_by_a_lingering_group_member(workspace: Path) -> None:
    pids = workspace / "pids"
    async with Runtime(root=workspace) as rt, rt.session() as s:
        jm = JobManager.for_session(s)
        running = await start(
            CommandSpec(
                ["bash", "-c", f"(sleep 0.8; echo late) & echo $! > {pids}; echo early"],
                workspace,
                dict(os.environ),
                jm.log_dir,
            )
        )
        info = await running.wait(10)
        assert info is not None and info.returncode == 0  # the command's own process is done ...
        assert running.group_alive()  # ... but its group is not
        job = jm.adopt(running, label="linger", call_seq=None, promoted_because=PROMOTED_LINGERING)
        res = await s.step([call("bg", action="output", taskID=job.id)])
        assert res.results[0].metadata["status"] == "running"  # active until the whole group exited
        assert res.results[0].metadata["commandExited"] is True
        assert "completion" not in res.results[0].metadata
        res = await s.step([call("bg", action="wait", taskID=job.id)])
        assert res.results[0].metadata["status"] == "completed"
        assert "]\nearly\nlate\n" in res.results[0].text
        assert not alive(int(pids.read_text()))


async def test_deadline_stops_the_whole_group(workspace: Path) -> None:
    pids = workspace / "pids"
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, f"sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); wait", deadline_s=0.5)
        members = wait_pids(pids, 2)
        await asyncio.wait_for(job.finished.wait(), 20)
        assert job.status == "timed_out"
        assert not any(alive(p) for p in members)
        row = rt.store.query("SELECT status, killed_by FROM jobs WHERE id = ?", (job.id,))[0]
        assert tuple(row) == ("timed_out", "timeout")


async def test_zero_deadline_means_none_and_six_hours_is_the_cap(workspace: Path) -> None:
    async with Runtime(root=workspace) as rt, rt.session() as s:
        a = await start_job(s, "sleep 30", deadline_s=0)
        b = await start_job(s, "sleep 30", deadline_s=10 * 3600)
        assert a.deadline_at is None
        assert b.deadline_at is not None and abs((b.deadline_at - b.started_at) - 6 * 3600) < 1


async def test_session_end_stops_groups_and_records_the_end(workspace: Path) -> None:
    pids = workspace / "pids"
    async with Runtime(root=workspace) as rt:
        async with rt.session() as s:
            job = await start_job(
                s, f"trap '' TERM; sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); wait"
            )
            members = wait_pids(pids, 2)
        assert not any(alive(p) for p in members)
        row = rt.store.query("SELECT status, ended_at FROM jobs WHERE id = ?", (job.id,))[0]
        assert row["status"] == "stopped" and row["ended_at"] is not None
        events = [e["kind"] for e in rt.store.events(s.id)]
        assert "job-stop" in events and "job-ended" in events


async def test_bg_classification_by_action() -> None:
    tool = BgTool()
    for action in ("list", "output", "wait", "artifact"):
        assert tool.classify(BgArgs(action=action)).effect is Effect.ReadOnly  # type: ignore[arg-type]
    assert tool.classify(BgArgs(action="cancel")).effect is Effect.SideEffecting


async def test_bg_cancel_stops_the_group(workspace: Path) -> None:
    pids = workspace / "pids"
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, f"sleep 60 & echo $! >> {pids}; (sleep 60 & echo $! >> {pids}); wait")
        members = wait_pids(pids, 2)
        res = await s.step([call("bg", action="cancel", taskID=job.id, reason="not needed")])
        rec = res.results[0]
        assert rec.outcome == "ok", rec.text
        assert rec.metadata["groupExited"] is True and rec.metadata["signals"] == ["SIGTERM"]
        assert not any(alive(p) for p in members)
        assert job.status == "cancelled"
        res = await s.step([call("bg", action="cancel", taskID=job.id)])
        assert "already ended" in res.results[0].text
        res = await s.step([call("bg", action="output", taskID="job_nope")])
        assert res.results[0].outcome == "blocked" and "taskID" in res.results[0].text


async def test_bg_wait_is_capped_and_says_so(workspace: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from zuno import limits

    monkeypatch.setattr(limits, "BG_WAIT_MAX_S", 0.3)
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, "echo working; sleep 30")
        res = await s.step([call("bg", action="wait", taskID=job.id, timeout_ms=600_000)])
        rec = res.results[0]
        assert rec.outcome == "ok" and rec.metadata["wait"] == "timed out"
        assert "[notice] the wait timed out" in rec.text and "capped at 0.3s" in rec.text
        # The job (30 s) still runs: the 600 s asked for was clamped to the cap, not waited out.
        assert rec.metadata["status"] == "running" and "working" in rec.text


async def test_job_output_wait_is_capped_and_cancel_says_so(workspace: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from zuno import limits

    monkeypatch.setattr(limits, "JOB_OUTPUT_WAIT_MAX_S", 0.3)
    async with Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        job = await start_job(s, "echo hi; sleep 30")
        res = await s.step([call("job_output", job_id=job.id, wait="exit", timeout_ms=600_000)])
        rec = res.results[0]
        assert rec.outcome == "ok" and "[notice] the exit wait timed out" in rec.text and "quiet for" in rec.text
        assert "[status: running" in rec.text
        monkeypatch.setattr(limits, "JOB_OUTPUT_WAIT_MAX_S", 30.0)
        task = asyncio.create_task(s.step([call("job_output", job_id=job.id, wait="exit")]))
        await asyncio.sleep(0.3)
        s.cancel()
        res = await asyncio.wait_for(task, 20)
        rec = res.results[0]
        assert rec.cancelled and "[notice] the exit wait was cancelled" in rec.text
        assert "[status: running" in rec.text and job.active
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, "echo hi; sleep 30")
        task = asyncio.create_task(s.step([call("bg", action="wait", taskID=job.id)]))
        await asyncio.sleep(0.3)
        s.cancel()
        rec = (await asyncio.wait_for(task, 20)).results[0]
        assert rec.cancelled and "the wait was cancelled" in rec.text and job.active


async def test_ended_jobs_beyond_the_most_recent_few_are_served_from_disk(workspace: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from zuno import limits

    monkeypatch.setattr(limits, "BACKGROUND_ENDED_TAILS_KEPT", 2)
    async with Runtime(root=workspace) as rt, rt.session() as s:
        jobs = []
        for i in range(4):
            job = await start_job(s, f"echo job{i}")
            await asyncio.wait_for(job.finished.wait(), 20)
            jobs.append(job)
        res = await s.step([call("bg", action="output", taskID=j.id) for j in jobs])
        assert [r.metadata["fromDisk"] for r in res.results] == [True, True, False, False]
        assert [f"job{i}\n" in r.text for i, r in enumerate(res.results)] == [True] * 4


async def test_a_notice_handed_to_the_running_step_is_not_withdrawn(workspace: Path) -> None:
    async with Runtime(root=workspace) as rt, rt.session() as s:
        job = await start_job(s, "echo done")
        await asyncio.wait_for(job.finished.wait(), 20)
        # the step's notices (handed out at its start) include the completion; the wait in that
        # same step must not claim it a second time
        res = await s.step([call("bg", action="wait", taskID=job.id)])
        assert [n["job_id"] for n in notices_of(res)] == [job.id]
        assert res.results[0].metadata["completion"]["deliveredHere"] is False
        res = await s.step([call("bg", action="list")])
        assert not notices_of(res)

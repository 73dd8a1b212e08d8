"""shell's background arguments, wired to the session's JobManager: run_in_background, promotion by
yield_time_ms and by a lingering group member, the non-promotable cap, backgroundPurpose."""

from __future__ import annotations

from pathlib import Path

import zuno
from zuno.jobs import PROMOTED_LINGERING, PROMOTED_REQUESTED, PROMOTED_YIELD


def _shell(**arguments: object) -> dict[str, object]:
    return {"name": "shell", "arguments": arguments}


async def test_run_in_background_returns_a_job_and_its_completion_is_readable(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        # The command cannot end before the test opens its gate: the step returning at all proves it
        # did not wait for the command.
        gate = workspace / "gate"
        res = await s.step(
            [_shell(command="echo hi; while [ ! -e gate ]; do sleep 0.02; done; echo done", run_in_background=True)]
        )
        rec = res.results[0]
        gate.touch()
        assert rec.outcome == "ok", rec.text
        bg = rec.metadata["background"]
        assert bg["promotedBecause"] == PROMOTED_REQUESTED
        r = rec.metadata["receipt"]
        assert r["decision"] == "nothing" and r["authority"] == "unknown"
        assert bg["taskID"] in r["notProven"][0]
        assert rec.text.splitlines()[-1] == f"[verification {r['id']}]"
        res = await s.step([{"name": "bg", "arguments": {"action": "wait", "taskID": bg["taskID"]}}])
        out = res.results[0]
        assert "done" in out.text


async def test_run_in_background_always_returns_a_job_even_when_the_command_already_ended(workspace: Path) -> None:
    """A command that exits before the call returns is still the job the caller asked for: its
    completion is delivered like any other (only a command the guard could not run is not a job)."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step([_shell(command="exit 0", run_in_background=True) for _ in range(20)])
        tasks = [r.metadata["background"]["taskID"] for r in res.results]
        assert len(set(tasks)) == 20
        for task in tasks:
            (waited,) = (await s.step([{"name": "bg", "arguments": {"action": "wait", "taskID": task}}])).results
            rid = waited.metadata["receiptId"]
            assert rt.receipt(rid)["exitCode"] == 0  # type: ignore[index]


async def test_yield_time_promotes_a_long_foreground_command(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        # The command cannot end before the test opens its gate: the step returning at all proves it
        # did not wait for the command.
        res = await s.step(
            [_shell(command="echo started; touch out.txt; while [ ! -e gate ]; do sleep 0.02; done", yield_time_ms=300)]
        )
        (workspace / "gate").touch()
        rec = res.results[0]
        assert rec.metadata["background"]["promotedBecause"] == PROMOTED_YIELD
        assert rec.metadata["writtenPaths"] == []  # still writing: not reported
        assert "writtenPathsSkipped" in rec.metadata
        assert rec.metadata["receipt"]["decision"] == "nothing"


async def test_a_lingering_group_member_promotes_even_with_yield_zero(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step([_shell(command="sleep 2 >/dev/null 2>&1 & echo leader; exit 0", yield_time_ms=0)])
        rec = res.results[0]
        assert rec.metadata["background"]["promotedBecause"] == PROMOTED_LINGERING
        r = rec.metadata["receipt"]
        assert r["exitCode"] == 0  # the command's own status is known and reported
        assert any("still run as background job" in n for n in r["notProven"])


async def test_deliberate_waiting_is_not_promoted(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step([_shell(command="sleep 1; git status >/dev/null 2>&1; true", yield_time_ms=100)])
        rec = res.results[0]
        assert "background" not in rec.metadata
        assert rec.metadata["exitCode"] == 0
        res = await s.step([_shell(command="sleep 0", timeout_ms=0)])
        assert res.results[0].metadata["timeoutMs"] == 600_000  # keeps the default cap


async def test_background_timeout_and_purpose(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        res = await s.step(
            [
                _shell(
                    command="sleep 30",
                    run_in_background=True,
                    timeout_ms=3_600_000,
                    backgroundPurpose="remoteObserver",
                )
            ]
        )
        rec = res.results[0]
        bg = rec.metadata["background"]
        assert bg["backgroundPurpose"] == "remoteObserver"
        assert 3500 < bg["deadline_in_s"] <= 3600
        assert "remoteObserver" in rec.text
        res = await s.step([{"name": "bg", "arguments": {"action": "cancel", "taskID": bg["taskID"]}}])
        assert res.results[0].outcome == "ok"
        res = await s.step([_shell(command="true", timeout_ms=3_600_000)])
        assert res.results[0].outcome == "blocked" and "run_in_background" in res.results[0].text


async def test_a_background_jobs_completion_cites_the_receipt_of_its_own_exit(workspace: Path) -> None:
    import asyncio

    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        # Inline: a terminal bg wait sees the end and cites the receipt.
        res = await s.step([_shell(command="echo out; exit 3", run_in_background=True)])
        task = res.results[0].metadata["background"]["taskID"]
        (waited,) = (await s.step([{"name": "bg", "arguments": {"action": "wait", "taskID": task}}])).results
        rid = waited.metadata["receiptId"]
        assert waited.text.splitlines()[-1] == f"[verification {rid}]"
        r = rt.receipt(rid)
        assert r is not None and (r["exitCode"], r["decision"], r["authority"]) == (3, "failed", "authoritative")
        assert task in r["decidedBy"]

        # As a notice: the job ends between steps; the next step's notice cites a receipt that,
        # like a foreground one, is derived when the command masks its status.
        res = await s.step([_shell(command="false || true", run_in_background=True)])
        task2 = res.results[0].metadata["background"]["taskID"]
        job = s.services.peek(zuno.jobs.JobManager).get(task2)  # type: ignore[union-attr]
        await asyncio.wait_for(job.finished.wait(), 20)
        nxt = await s.step([])
        (notice,) = [n for n in nxt.notices if n.get("taskID") == task2]
        assert notice["receiptId"] and f"[verification {notice['receiptId']}]" in notice["text"]
        r2 = rt.receipt(notice["receiptId"])
        assert r2 is not None and (r2["exitCode"], r2["decision"], r2["authority"]) == (0, "passed", "derived")
        assert r2["limitations"][0]["construct"] == "or-fallback"

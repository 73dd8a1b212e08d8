"""todo_get / todo_update / chord todo_write on one store, and goal_get / goal_update with
evidence from real shell receipts retired by later writes."""

from __future__ import annotations

from pathlib import Path

import pytest

import zuno
from zuno.surface import default_registry
from zuno.tools.state import read_goal, read_todo
from zuno.tools.state.docstore import StateRefusal
from zuno.tools.state.goal import resume_goal

from statehelp import body, call


async def test_todo_revisions_dependencies_owners_and_terminal(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert body(await call(s, "todo_get"))["todos"] is None
        rec = await call(
            s, "todo_update", {"action": "add", "items": [{"title": "a"}, {"title": "b", "depends_on": ["t1"]}]}
        )
        assert rec.outcome == "ok" and rec.metadata["revision"] == 1 and rec.metadata["invalidatesContext"] is True
        rec = await call(s, "todo_update", {"action": "add", "items": [{"title": "c"}]})
        assert rec.metadata["refusal"]["kind"] == "StaleRevision" and rec.metadata["refusal"]["currentRevision"] == 1
        rec = await call(s, "todo_update", {"items": []})
        assert rec.block_kind == "invalid_arguments" and "add, patch, remove" in rec.text
        # b cannot start before a is completed
        rec = await call(
            s,
            "todo_update",
            {"action": "patch", "expected_revision": 1, "items": [{"id": "t2", "status": "in_progress"}]},
        )
        assert rec.metadata["refusal"]["kind"] == "DependenciesOpen" and rec.metadata["refusal"][
            "openDependencies"
        ] == ["t1"]
        rec = await call(
            s, "todo_update", {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "depends_on": ["t2"]}]}
        )
        assert rec.metadata["refusal"]["kind"] == "DependencyCycle"
        # in_progress without an owner adopts the item; then the section is runnable
        rec = await call(
            s,
            "todo_update",
            {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "status": "in_progress"}]},
        )
        assert rec.outcome == "ok"
        refresh = dict(default_registry().refreshers)["todo"]
        section = refresh(rt.store, s.id)
        assert section.runnable is True and "t1 in_progress: a [main]" in section.text
        rec = await call(
            s,
            "todo_update",
            {"action": "patch", "expected_revision": 2, "items": [{"id": "t1", "status": "completed"}]},
        )
        rec = await call(
            s, "todo_update", {"action": "patch", "expected_revision": 3, "items": [{"id": "t1", "status": "pending"}]}
        )
        assert rec.metadata["refusal"]["kind"] == "InvalidTransition" and "terminal" in rec.text
        rec = await call(s, "todo_update", {"action": "remove", "expected_revision": 3, "ids": ["t1"]})
        assert rec.metadata["refusal"]["kind"] == "StillDependedOn"
        # fingerprints: stable across reads, changed by a mutation
        f1 = (await call(s, "todo_get")).metadata["progressFingerprint"]
        f2 = (await call(s, "todo_get", {"intent": "again"})).metadata["progressFingerprint"]
        await call(s, "todo_update", {"action": "patch", "expected_revision": 3, "items": [{"id": "t2", "notes": "n"}]})
        f3 = (await call(s, "todo_get")).metadata["progressFingerprint"]
        assert f1 == f2 != f3 == refresh(rt.store, s.id).fingerprint


async def test_todo_replayed_delivery_is_idempotent(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        args = {"action": "add", "items": [{"title": "once"}]}
        a = await call(s, "todo_update", args, id="c1")
        b = await call(s, "todo_update", args, id="c1")
        assert a.metadata["revision"] == b.metadata["revision"] == 1 and b.metadata["replayed"] is True
        assert len(read_todo(rt.store, s.id)["todos"]) == 1


async def test_chord_todo_write_writes_the_whole_list_on_the_same_store(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        assert "todo_write" in rt.surface.names() and "todo_update" not in rt.surface.names()
        rec = await call(s, "todo_write", {"todos": [{"content": "one"}, {"content": "two", "status": "in_progress"}]})
        assert rec.outcome == "ok", rec.text
        items = read_todo(rt.store, s.id)["todos"]
        assert [(i["id"], i["title"], i["status"]) for i in items] == [
            ("t1", "one", "pending"),
            ("t2", "two", "in_progress"),
        ]
        rec = await call(
            s, "todo_write", {"todos": [{"id": "t2", "content": "two", "status": "completed"}, {"content": "three"}]}
        )
        items = read_todo(rt.store, s.id)
        assert items["revision"] == 2 and [(i["id"], i["status"]) for i in items["todos"]] == [
            ("t2", "completed"),
            ("t3", "pending"),
        ]
        rec = await call(s, "todo_write", {"todos": [{"id": "t2", "content": "two", "status": "pending"}]})
        assert rec.metadata["refusal"]["kind"] == "InvalidTransition"
        sid = s.id
    # the zuno profile reads the same list
    async with zuno.Runtime(root=workspace) as rt, rt.session(sid) as s:
        assert [i["id"] for i in body(await call(s, "todo_get"))["todos"]] == ["t2", "t3"]


GOAL = {
    "action": "create",
    "objective": "make the check pass",
    "criteria": [{"text": "the check passes", "requires_evidence": True}, {"text": "explained to the user"}],
}


async def test_goal_completion_needs_fresh_passed_evidence_from_this_session(workspace: Path) -> None:
    (workspace / "src.txt").write_text("ok\n")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert body(await call(s, "goal_get"))["goal"] is None
        assert (await call(s, "goal_update", GOAL)).metadata["revision"] == 1
        check = {"command": "grep -q ok src.txt"}
        first = await call(s, "shell", check)
        rcp = first.metadata["receiptId"]
        assert (
            first.metadata["receipt"]["decision"] == "passed"
            and first.metadata["receipt"]["authority"] == "authoritative"
        )
        # an evidence criterion without a receipt, or with something that is not one, is refused
        rec = await call(s, "goal_update", {"action": "satisfy", "expected_revision": 1, "criterion_id": "c1"})
        assert rec.metadata["refusal"]["kind"] == "EvidenceRejected"
        rec = await call(
            s,
            "goal_update",
            {"action": "satisfy", "expected_revision": 1, "criterion_id": "c1", "evidence": "call_0002_00"},
        )
        assert rec.metadata["refusal"]["reason"] == "not_a_receipt"
        failed = await call(s, "shell", {"command": "grep -q missing src.txt"})
        rec = await call(
            s,
            "goal_update",
            {
                "action": "satisfy",
                "expected_revision": 1,
                "criterion_id": "c1",
                "evidence": failed.metadata["receiptId"],
            },
        )
        assert rec.metadata["refusal"]["reason"] == "not_passed"
        masked = await call(s, "shell", {"command": "grep -q ok src.txt || true"})
        assert masked.metadata["receipt"]["authority"] == "derived"
        rec = await call(
            s,
            "goal_update",
            {
                "action": "satisfy",
                "expected_revision": 1,
                "criterion_id": "c1",
                "evidence": masked.metadata["receiptId"],
            },
        )
        assert rec.metadata["refusal"]["reason"] == "not_authoritative"
        # the first receipt: passed, authoritative, but a later write... none yet, so it is accepted
        rec = await call(
            s, "goal_update", {"action": "satisfy", "expected_revision": 1, "criterion_id": "c1", "evidence": rcp}
        )
        assert rec.outcome == "ok", rec.text
        await call(s, "goal_update", {"action": "satisfy", "expected_revision": 2, "criterion_id": "c2"})
        # a later write retires the receipt: completion is refused, naming the criterion
        w = await call(s, "write", {"path": "notes.txt", "content": "changed\n"})
        assert w.metadata["writtenPaths"] == ["notes.txt"]
        rec = await call(s, "goal_update", {"action": "complete", "expected_revision": 3})
        assert rec.metadata["refusal"]["kind"] == "CriteriaUnsatisfied"
        (missing,) = rec.metadata["refusal"]["criteria"]
        assert missing["criterion"] == "c1" and missing["reason"] == "stale" and "notes.txt" in missing["detail"]
        assert "c1 (stale" in rec.text
        assert body(await call(s, "goal_get"))["stale_evidence"][0]["criterion"] == "c1"
        # a shell command that writes retires a fresh receipt too (its writtenPaths)
        fresh = await call(s, "shell", check)
        await call(s, "shell", {"command": "sed -i s/ok/ok/ src.txt"})
        rec = await call(
            s,
            "goal_update",
            {
                "action": "satisfy",
                "expected_revision": 3,
                "criterion_id": "c1",
                "evidence": fresh.metadata["receiptId"],
            },
        )
        assert rec.metadata["refusal"]["reason"] == "stale"
        # a fresh receipt after the last write completes the Goal
        fresh = await call(s, "shell", check)
        rec = await call(
            s,
            "goal_update",
            {
                "action": "satisfy",
                "expected_revision": 3,
                "criterion_id": "c1",
                "evidence": fresh.metadata["receiptId"],
            },
        )
        assert rec.outcome == "ok"
        rec = await call(s, "goal_update", {"action": "complete", "expected_revision": 4})
        assert rec.outcome == "ok", rec.text
        assert read_goal(rt.store, s.id)["goal"]["status"] == "completed"
        rec = await call(s, "goal_update", {"action": "abandon", "expected_revision": 5, "reason": "x"})
        assert rec.metadata["refusal"]["kind"] == "TerminalGoal"
        other_rcp = fresh.metadata["receiptId"]
    # a receipt of another session is not this session's evidence
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "goal_update", GOAL)
        rec = await call(
            s, "goal_update", {"action": "satisfy", "expected_revision": 1, "criterion_id": "c1", "evidence": other_rcp}
        )
        assert rec.metadata["refusal"]["reason"] == "other_session"


async def test_goal_pause_resume_and_the_section(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "goal_update", GOAL)
        refresh = dict(default_registry().refreshers)["goal"]
        section = refresh(rt.store, s.id)
        assert section.goal_active and section.runnable
        rec = await call(s, "goal_update", {"action": "pause", "expected_revision": 1, "reason": {"kind": "sometime"}})
        assert rec.block_kind == "invalid_arguments"
        rec = await call(
            s,
            "goal_update",
            {"action": "pause", "expected_revision": 1, "reason": {"kind": "blocked", "detail": "which db?"}},
        )
        assert rec.outcome == "ok"
        section = refresh(rt.store, s.id)
        assert not section.goal_active and "paused: blocked — which db?" in section.text
        rec = await call(s, "goal_update", {"action": "complete", "expected_revision": 2})
        assert rec.metadata["refusal"]["kind"] == "InvalidTransition"
        # the model cannot resume a paused Goal, nor pause it with the host's or a request's reasons
        rec = await call(s, "goal_update", {"action": "resume", "expected_revision": 2})
        assert rec.block_kind == "invalid_arguments"
        for kind in ("no_progress", "waiting_input"):
            rec = await call(s, "goal_update", {"action": "pause", "expected_revision": 2, "reason": {"kind": kind}})
            assert rec.block_kind == "invalid_arguments"
        with pytest.raises(StateRefusal) as stale:
            resume_goal(rt.store, s.id, 1, "goal-resume-1")
        assert stale.value.facts["currentRevision"] == 2
        assert resume_goal(rt.store, s.id, 2, "goal-resume-2")["revision"] == 3
        rec = await call(
            s, "goal_update", {"action": "abandon", "expected_revision": 3, "reason": "user changed course"}
        )
        assert rec.outcome == "ok" and read_goal(rt.store, s.id)["goal"]["status"] == "abandoned"


async def test_declarations(workspace: Path) -> None:
    rt = zuno.Runtime(root=workspace)
    d = {n: t.declarations.as_dict() for n, t in rt.surface.tools.items()}
    read = {"effect": "ReadOnly", "replay": "Safe", "concurrency": "ParallelSafe"}
    mutation = {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
    for n in ("plan_get", "todo_get", "goal_get"):
        assert d[n] == read
    for n in ("plan_update", "todo_update", "goal_update"):
        assert d[n] == mutation
    rt.store.close()


async def test_an_active_goal_pauses_with_no_progress_after_three_identical_observations(workspace: Path) -> None:
    from zuno.tools.state.progress import observe_goal

    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert observe_goal(rt.store, s.id, "o0") is None  # no Goal: nothing observed
        await call(s, "goal_update", GOAL)
        assert observe_goal(rt.store, s.id, "o1").count == 1
        assert observe_goal(rt.store, s.id, "o2").count == 2
        assert observe_goal(rt.store, s.id, "o2").count == 2  # the same observation delivered again
        # progress (a write) resets the count
        await call(s, "write", {"path": "f.txt", "content": "x"})
        assert observe_goal(rt.store, s.id, "o3").count == 1
        assert observe_goal(rt.store, s.id, "o4").count == 2
        third = observe_goal(rt.store, s.id, "o5")
        assert third.count == 3 and third.paused is True
        g = read_goal(rt.store, s.id)["goal"]
        assert g["status"] == "paused" and g["pause_reason"]["kind"] == "no_progress"
        assert observe_goal(rt.store, s.id, "o6") is None  # paused: no longer observed

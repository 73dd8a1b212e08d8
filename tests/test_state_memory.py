"""memory_read / memory_update: gated by memory.enabled, scoped per workspace and agent, bounded,
applied at once unless a review policy makes updates wait for an explicit accept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zuno
from zuno import limits
from zuno.tools.state import accept_proposal, reject_proposal
from zuno.tools.state.docstore import StateRefusal
from zuno.tools.state.memory import proposals

from statehelp import call

ON = {"memory": {"enabled": True}}


def _mem(rec) -> dict:
    return {e["key"]: e["content"] for e in json.loads(rec.text)["memory"]}


def test_memory_appears_only_when_enabled(workspace: Path) -> None:
    rt = zuno.Runtime(root=workspace, config_overrides={"tools": {"memory_read": True}})
    assert "memory_read" not in rt.surface.names() and "memory.enabled" in rt.surface.disabled["memory_read"]
    rt.store.close()
    rt = zuno.Runtime(root=workspace, config_overrides=ON)
    assert {"memory_read", "memory_update"} <= set(rt.surface.names())
    d = {n: rt.surface.tools[n].declarations.as_dict() for n in ("memory_read", "memory_update")}
    assert d["memory_read"] == {"effect": "ReadOnly", "replay": "Safe", "concurrency": "ParallelSafe"}
    assert d["memory_update"] == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
    rt.store.close()


async def test_scoped_per_workspace_and_agent_applied_automatically(workspace: Path, tmp_path: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=ON) as rt, rt.session() as s:
        rec = await call(s, "memory_update", {"action": "set", "key": "tests", "content": "pytest -q"})
        assert rec.outcome == "ok" and rec.metadata["memory"]["revision"] == 1
        assert _mem(await call(s, "memory_read")) == {"tests": "pytest -q"}
        db = rt.store.path
    # another session of the same workspace and agent sees it; another agent does not
    async with zuno.Runtime(root=workspace, config_overrides=ON) as rt, rt.session() as s:
        assert _mem(await call(s, "memory_read", {"key": "tests"})) == {"tests": "pytest -q"}
    async with (
        zuno.Runtime(root=workspace, config_overrides={**ON, "agent": {"name": "reviewer"}}) as rt,
        rt.session() as s,
    ):
        assert _mem(await call(s, "memory_read")) == {}
    other = tmp_path / "other"
    other.mkdir()
    async with zuno.Runtime(root=other, db=db, config_overrides=ON) as rt, rt.session() as s:
        assert _mem(await call(s, "memory_read")) == {}
        rec = await call(s, "memory_update", {"key": "x", "content": "y"})
        assert rec.block_kind == "invalid_arguments" and "set, delete" in rec.text


async def test_bounds_are_crossed(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=ON) as rt, rt.session() as s:
        rec = await call(
            s, "memory_update", {"action": "set", "key": "big", "content": "x" * (limits.MEMORY_MAX_ENTRY_BYTES + 1)}
        )
        assert rec.metadata["refusal"]["kind"] == "MemoryTooLarge"
        full = "x" * limits.MEMORY_MAX_ENTRY_BYTES
        per = limits.MEMORY_MAX_TOTAL_BYTES // limits.MEMORY_MAX_ENTRY_BYTES
        for i in range(per):
            assert (await call(s, "memory_update", {"action": "set", "key": f"k{i}", "content": full})).outcome == "ok"
        rec = await call(s, "memory_update", {"action": "set", "key": "one-more", "content": "x"})
        assert (
            rec.metadata["refusal"]["kind"] == "MemoryFull"
            and rec.metadata["refusal"]["size"] == limits.MEMORY_MAX_TOTAL_BYTES + 1
        )
        for i in range(per):
            await call(s, "memory_update", {"action": "delete", "key": f"k{i}"})
        for i in range(limits.MEMORY_MAX_ENTRIES):
            assert (await call(s, "memory_update", {"action": "set", "key": f"e{i}", "content": "v"})).outcome == "ok"
        rec = await call(s, "memory_update", {"action": "set", "key": "e-extra", "content": "v"})
        assert (
            rec.metadata["refusal"]["kind"] == "MemoryFull"
            and rec.metadata["refusal"]["limit"] == limits.MEMORY_MAX_ENTRIES
        )


async def test_a_review_policy_makes_updates_wait_for_an_explicit_accept(workspace: Path) -> None:
    cfg = {"memory": {"enabled": True, "review_policy": "review"}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        rec = await call(s, "memory_update", {"action": "set", "key": "style", "content": "tabs"})
        pid = rec.metadata["memoryProposal"]["id"]
        assert rec.outcome == "ok" and "waits for an explicit accept" in rec.text
        got = json.loads((await call(s, "memory_read")).text)
        assert got == {"memory": [], "pending_proposals": 1}
        rec2 = await call(s, "memory_update", {"action": "set", "key": "other", "content": "no"})
        assert [p["id"] for p in proposals(rt.store, str(rt.root))] == [pid, rec2.metadata["memoryProposal"]["id"]]
        assert accept_proposal(rt.store, pid)["revision"] == 1
        reject_proposal(rt.store, rec2.metadata["memoryProposal"]["id"])
        assert _mem(await call(s, "memory_read")) == {"style": "tabs"}
        with pytest.raises(StateRefusal):
            accept_proposal(rt.store, pid)
        for i in range(limits.MEMORY_MAX_PENDING_PROPOSALS):  # distinct: an identical one is not made twice
            await call(s, "memory_update", {"action": "set", "key": "style", "content": f"v{i}"})
        rec = await call(s, "memory_update", {"action": "delete", "key": "style"})
        assert rec.metadata["refusal"]["kind"] == "TooManyProposals"


async def test_zuno_memory_lists_and_accepts(workspace: Path, run_zuno) -> None:
    cfg = {"memory": {"enabled": True, "review_policy": "review"}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        pid = (await call(s, "memory_update", {"action": "set", "key": "lint", "content": "ruff check ."})).metadata[
            "memoryProposal"
        ]["id"]
    p = run_zuno("memory", "--json")
    assert p.returncode == 0 and [x["id"] for x in json.loads(p.stdout)["pending"]] == [pid]
    p = run_zuno("memory", "accept", pid)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_zuno("memory", "accept", pid)
    assert p.returncode == 1 and "not pending" in p.stderr
    p = run_zuno("memory")
    assert "main/lint (revision 1): ruff check ." in p.stdout

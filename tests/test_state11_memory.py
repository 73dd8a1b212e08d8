"""Memory proposals for one key: one accept decides the key. Accepting one supersedes the others
pending for the same key (status superseded, superseded_by the accepted id); a second accept, or a
reject, of a superseded one is refused naming the proposal that won. An identical proposal is not
made twice, and an accept never overwrites unseen a change made since the proposal (StaleProposal).
Through the tool, the Python API and `zuno memory accept/reject` (with --json)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import zuno
from zuno.store import Store
from zuno.tools.state import MIGRATIONS as STATE_MIGRATIONS
from zuno.tools.state import accept_proposal, reject_proposal
from zuno.tools.state.docstore import StateRefusal
from zuno.tools.state.memory import entries, proposals

from conftest import zuno_env
from statehelp import call

REVIEW = {"memory": {"enabled": True, "review_policy": "review"}}


async def _propose(s, key: str, content: str | None = None) -> dict:
    args: dict = {"action": "delete", "key": key}
    if content is not None:
        args = {"action": "set", "key": key, "content": content}
    rec = await call(s, "memory_update", args)
    assert rec.outcome == "ok", rec.text
    return {"text": rec.text, **rec.metadata["memoryProposal"]}


async def test_accepting_one_proposal_supersedes_the_others_for_the_key(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        a = await _propose(s, "test-command", "make test")
        b = await _propose(s, "test-command", "pytest -q")
        c = await _propose(s, "test-command")  # a delete of the same key
        other = await _propose(s, "style", "tabs")
        assert a["sameKey"] == [] and b["sameKey"] == [a["id"]] and c["sameKey"] == [a["id"], b["id"]]
        assert f"Also waiting for 'test-command': {a['id']}, {b['id']}" in c["text"]
        assert "accepting one supersedes the others" in c["text"]
        root = str(rt.root)
        result = accept_proposal(rt.store, b["id"])
        assert result["revision"] == 1 and sorted(result["superseded"]) == sorted([a["id"], c["id"]])
        assert [(e["key"], e["content"]) for e in entries(rt.store, root, "main")] == [("test-command", "pytest -q")]
        assert [p["id"] for p in proposals(rt.store, root)] == [other["id"]]  # the other key still waits
        gone = proposals(rt.store, root, status="superseded")
        assert {p["id"]: p["superseded_by"] for p in gone} == {a["id"]: b["id"], c["id"]: b["id"]}
        # before: the second accept applied too, silently overwriting the first (revision 2)
        for decide in (accept_proposal, reject_proposal):
            with pytest.raises(StateRefusal) as e:
                decide(rt.store, a["id"])
            assert e.value.kind == "NotPending" and e.value.facts["supersededBy"] == b["id"]
            assert f"superseded by {b['id']}" in e.value.message and "'test-command'" in e.value.message
        assert entries(rt.store, root, "main")[0]["revision"] == 1
        got = json.loads((await call(s, "memory_read")).text)
        assert got == {
            "memory": [{"key": "test-command", "revision": 1, "content": "pytest -q"}],
            "pending_proposals": 1,
        }


async def test_an_identical_proposal_is_not_made_twice(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        a = await _propose(s, "k", "v")
        again = await _propose(s, "k", "v")
        assert again["id"] == a["id"] and again["existing"] is True and "already waits" in again["text"]
        assert len(proposals(rt.store, str(rt.root))) == 1
        different = await _propose(s, "k", "v2")
        assert different["id"] != a["id"] and different["sameKey"] == [a["id"]]


async def test_an_accept_does_not_overwrite_a_change_made_since_the_proposal(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        a = await _propose(s, "k", "proposed under review")
    # the policy is turned off; the agent sets the key directly
    async with zuno.Runtime(root=workspace, config_overrides={"memory": {"enabled": True}}) as rt, rt.session() as s:
        rec = await call(s, "memory_update", {"action": "set", "key": "k", "content": "set directly"})
        assert rec.outcome == "ok"
        with pytest.raises(StateRefusal) as e:
            accept_proposal(rt.store, a["id"])
        assert e.value.kind == "StaleProposal"
        assert (e.value.facts["baseRevision"], e.value.facts["currentRevision"]) == (0, 1)
        assert f"zuno memory reject {a['id']}" in e.value.required_action
        assert entries(rt.store, str(rt.root), "main")[0]["content"] == "set directly"
        assert [p["id"] for p in proposals(rt.store, str(rt.root))] == [a["id"]]  # still pending, to reject
        reject_proposal(rt.store, a["id"])


async def test_zuno_memory_accept_and_reject_name_the_superseding_proposal(workspace: Path, run_zuno) -> None:
    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        a = await _propose(s, "lint", "ruff check .")
        b = await _propose(s, "lint", "ruff check src")
    p = run_zuno("memory", "accept", a["id"], "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["decision"] == "accepted" and out["key"] == "lint" and out["superseded"] == [b["id"]]
    p = run_zuno("memory", "accept", b["id"], "--json")
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["decision"] is None and out["refusal"]["kind"] == "NotPending"
    assert out["refusal"]["supersededBy"] == a["id"] and out["refusal"]["status"] == "superseded"
    assert f"superseded by {a['id']}" in p.stderr
    p = run_zuno("memory", "reject", b["id"])
    assert p.returncode == 1 and f"superseded by {a['id']}" in p.stderr and p.stdout == ""
    p = run_zuno("memory", "--json")
    assert json.loads(p.stdout)["pending"] == [] and json.loads(p.stdout)["memory"][0]["content"] == "ruff check ."
    # the text form says what the accept did, not a Python dict
    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        c = await _propose(s, "lint", "ruff check tests")
        d = await _propose(s, "lint")
    p = run_zuno("memory", "accept", d["id"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == (
        f"accepted {d['id']}: memory 'lint' deleted\nsuperseded (the same key, no longer pending): {c['id']}\n"
    )
    p = run_zuno("memory", "reject", "mp_nonesuch", "--json")
    assert p.returncode == 1
    assert json.loads(p.stdout)["refusal"]["message"] == "there is no memory proposal mp_nonesuch."


def test_two_processes_accepting_rival_proposals_leave_one_winner(workspace: Path) -> None:
    async def propose_four() -> list[str]:
        async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
            return [(await _propose(s, "k", f"value {i}"))["id"] for i in range(4)]

    ids = asyncio.run(propose_four())
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "zuno", "memory", "accept", pid, "--json"],
            cwd=workspace,
            env=zuno_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in ids
    ]
    outs = [(p.wait(timeout=120), json.loads(p.communicate()[0])) for p in procs]
    winners = [out for rc, out in outs if rc == 0]
    assert len(winners) == 1, outs
    won = winners[0]["proposal"]
    assert sorted(winners[0]["superseded"]) == sorted(set(ids) - {won})
    assert all(out["refusal"]["supersededBy"] == won for rc, out in outs if rc != 0)
    store = Store(workspace / ".zuno" / "zuno.db", STATE_MIGRATIONS, readonly=True)
    (entry,) = entries(store, str(workspace.resolve()), "main")
    store.close()
    assert entry["revision"] == 1 and f"value {ids.index(won)}" == entry["content"]


async def test_a_store_from_before_keeps_its_pending_proposals(workspace: Path) -> None:
    """The proposals table is rebuilt (a 'superseded' status, superseded_by, base_revision); a
    proposal pending in an older store stays pending and can be accepted."""
    db = workspace / ".zuno" / "old.db"
    db.parent.mkdir()
    old = Store(db, [m for m in STATE_MIGRATIONS if m[0] != "1404_state_memory_superseded"])
    old.execute(
        "INSERT INTO state_memory_proposals (id, root, agent, op, key, content, status, created_at)"
        " VALUES ('mp_old', ?, 'main', 'set', 'k', 'v', 'pending', 1.0)",
        (str(workspace.resolve()),),
    )
    old.close()
    async with zuno.Runtime(root=workspace, db=db) as rt:
        assert [p["id"] for p in proposals(rt.store, str(rt.root))] == ["mp_old"]
        assert accept_proposal(rt.store, "mp_old") == {"key": "k", "revision": 1, "bytes": 1, "superseded": []}

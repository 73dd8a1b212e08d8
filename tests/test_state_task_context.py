"""task_context: every merge and revise rule, sources and their digests, completion of a delivery
task, declarations by action."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.tools.state import record_message
from zuno.tools.state.sources import lookup_message, source_digest

from statehelp import body, call

ON = {"tools": {"task_context": True}}


async def _ctx(s: Any, args: dict[str, Any]) -> Any:
    return await call(s, "task_context", args)


def _tc(rec: Any) -> dict[str, Any]:
    return body(rec)["task_context"]


@pytest.fixture
def rt(workspace: Path):
    return zuno.Runtime(root=workspace, config_overrides=ON)


async def test_new_contexts_require_objective_task_kind_and_user_sources(rt: zuno.Runtime) -> None:
    async with rt, rt.session() as s:
        m1 = record_message(rt.store, s.id, [{"type": "text", "text": "fix the login bug, don't push"}])
        report = record_message(rt.store, s.id, [{"type": "text", "text": "[job done]"}], origin="runtime_report")
        marker = record_message(rt.store, s.id, [{"type": "text", "text": "summary"}], origin="compaction_marker")
        mine = record_message(rt.store, s.id, [{"type": "text", "text": "I will"}], role="assistant")
        assert body(await _ctx(s, {"action": "get"}))["task_context"] is None
        rec = await _ctx(s, {"action": "update", "objective": "fix login"})
        assert rec.metadata["refusal"]["kind"] == "NewContextIncomplete"
        assert rec.metadata["refusal"]["missing"] == ["task_kind", "source_message_ids"]
        # intent is only a UI label: it never supplies the task kind
        rec = await _ctx(
            s, {"action": "replace", "objective": "fix login", "source_message_ids": [m1], "intent": "delivery"}
        )
        assert rec.block_kind == "invalid_arguments" and "task_kind" in rec.text
        for bad, reason in (
            (report, "runtime_report"),
            (marker, "compaction_marker"),
            (mine, "assistant"),
            ("msg_nope", "unknown"),
        ):
            rec = await _ctx(
                s, {"action": "replace", "objective": "o", "task_kind": "delivery", "source_message_ids": [bad]}
            )
            assert rec.metadata["refusal"]["kind"] == "InvalidSource" and rec.metadata["refusal"]["reason"] == reason
        rec = await _ctx(
            s, {"action": "replace", "objective": "fix login", "task_kind": "delivery", "source_message_ids": [m1]}
        )
        assert rec.outcome == "ok" and rec.metadata["revision"] == 1
        assert _tc(rec)["sources"] == [
            {"id": m1, "digest": source_digest(lookup_message(rt.store, s.id, m1)), "state": "current"}
        ]
        # replace still carries the revision
        rec = await _ctx(
            s, {"action": "replace", "objective": "new", "task_kind": "inspection", "source_message_ids": [m1]}
        )
        assert rec.metadata["refusal"]["kind"] == "StaleRevision" and rec.metadata["refusal"]["currentRevision"] == 1


async def test_omitted_fields_keep_values_and_prohibitions_and_checks_merge(rt: zuno.Runtime) -> None:
    async with rt, rt.session() as s:
        m1 = record_message(rt.store, s.id, [{"type": "text", "text": "repair the index and rebuild it"}])
        m2 = record_message(rt.store, s.id, [{"type": "text", "text": "do not announce it"}])
        await _ctx(
            s,
            {
                "action": "replace",
                "objective": "repair",
                "task_kind": "delivery",
                "source_message_ids": [m1],
                "authorized": ["repair the index"],
                "decision_owner": "user",
                "checks": [{"kind": "delivery", "text": "index rebuilt"}],
            },
        )
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 1,
                "prohibitions": ["do not announce"],
                "source_message_ids": [m2],
                "checks": [{"kind": "safety", "text": "no data lost"}],
            },
        )
        tc = _tc(rec)
        assert tc["objective"] == "repair" and tc["decision_owner"] == "user" and tc["task_kind"] == "delivery"
        assert tc["authorized"] == ["repair the index"]  # "do not announce" does not erase the repair
        assert tc["prohibitions"] == ["do not announce"]
        assert [c["id"] for c in tc["checks"]] == ["k1", "k2"] and [x["id"] for x in tc["sources"]] == [m1, m2]
        rec = await _ctx(s, {"action": "update", "expected_revision": 2, "prohibitions": ["do not push"]})
        assert _tc(rec)["prohibitions"] == ["do not announce", "do not push"]


async def test_check_definitions_are_fixed_unless_revised_with_user_sources(rt: zuno.Runtime) -> None:
    async with rt, rt.session() as s:
        m1 = record_message(rt.store, s.id, [{"type": "text", "text": "tests must pass"}])
        m2 = record_message(rt.store, s.id, [{"type": "text", "text": "actually only the unit tests"}])
        await _ctx(
            s,
            {
                "action": "replace",
                "objective": "o",
                "task_kind": "delivery",
                "source_message_ids": [m1],
                "checks": [{"kind": "delivery", "text": "all tests pass"}],
            },
        )
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 1,
                "checks": [{"id": "k1", "status": "passed", "evidence": ["call_0001_00"]}],
            },
        )
        assert rec.outcome == "ok"
        rec = await _ctx(
            s, {"action": "update", "expected_revision": 2, "checks": [{"id": "k1", "text": "unit tests pass"}]}
        )
        assert rec.metadata["refusal"]["kind"] == "CheckDefinitionFixed"
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 2,
                "revise_checks": True,
                "checks": [{"id": "k1", "text": "unit tests pass"}],
            },
        )
        assert rec.metadata["refusal"]["kind"] == "RevisionNeedsSource"
        report = record_message(rt.store, s.id, [{"type": "text", "text": "x"}], origin="runtime_report")
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 2,
                "revise_checks": True,
                "source_message_ids": [report],
                "checks": [{"id": "k1", "text": "unit tests pass"}],
            },
        )
        assert rec.metadata["refusal"]["kind"] == "InvalidSource"
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 2,
                "revise_checks": True,
                "source_message_ids": [m2],
                "checks": [{"id": "k1", "text": "unit tests pass", "status": "passed", "evidence": ["old"]}],
            },
        )
        (k1,) = _tc(rec)["checks"]
        assert k1 == {"id": "k1", "kind": "delivery", "text": "unit tests pass", "status": "pending", "evidence": []}


async def test_passed_safety_checks_cannot_complete_a_delivery_task(rt: zuno.Runtime, workspace: Path) -> None:
    async with rt, rt.session() as s:
        m1 = record_message(rt.store, s.id, [{"type": "text", "text": "ship it safely"}])
        await _ctx(
            s,
            {
                "action": "replace",
                "objective": "o",
                "task_kind": "delivery",
                "source_message_ids": [m1],
                "checks": [{"kind": "safety", "text": "no secrets"}],
            },
        )
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 1,
                "status": "completed",
                "checks": [{"id": "k1", "status": "passed"}],
            },
        )
        assert rec.metadata["refusal"]["kind"] == "ChecksUnsatisfied" and "safety checks do not complete" in rec.text
        await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 1,
                "checks": [{"id": "k1", "status": "passed"}, {"kind": "delivery", "text": "built"}],
            },
        )
        rec = await _ctx(s, {"action": "update", "expected_revision": 2, "checks": [{"id": "k2", "status": "passed"}]})
        assert rec.metadata["refusal"]["kind"] == "EvidenceRequired"
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 2,
                "checks": [{"id": "k2", "status": "passed", "evidence": ["rcp_00"]}],
            },
        )
        assert rec.metadata["refusal"]["kind"] == "InvalidEvidence"
        sh = await call(s, "shell", {"command": "true"})
        rec = await _ctx(
            s,
            {
                "action": "update",
                "expected_revision": 2,
                "status": "completed",
                "checks": [{"id": "k2", "status": "passed", "evidence": [sh.metadata["receiptId"]]}],
            },
        )
        assert rec.outcome == "ok", rec.text
        assert _tc(rec)["status"] == "completed"
        rec = await _ctx(s, {"action": "update", "expected_revision": 3, "prohibitions": ["x"]})
        assert rec.metadata["refusal"]["kind"] == "TerminalContext"


async def test_source_digests_cover_attachments_and_a_changed_source_is_stale(rt: zuno.Runtime) -> None:
    async with rt, rt.session() as s:
        img = base64.b64encode(b"\x89PNG one").decode()
        parts = [
            {"type": "text", "text": "use this"},
            {"type": "image", "media_type": "image/png", "data_b64": img},
            {"type": "attachment", "name": "spec.pdf", "media_type": "application/pdf", "size": 10, "sha256": "aa"},
        ]
        m1 = record_message(rt.store, s.id, parts)
        d1 = source_digest(lookup_message(rt.store, s.id, m1))
        await _ctx(s, {"action": "replace", "objective": "o", "task_kind": "inspection", "source_message_ids": [m1]})
        # each part is covered: the image bytes and the attachment reference
        for i, changed in (
            (1, {**parts[1], "data_b64": base64.b64encode(b"\x89PNG two").decode()}),
            (2, {**parts[2], "sha256": "bb"}),
        ):
            new = [*parts]
            new[i] = changed
            rt.store.execute("UPDATE state_transcript SET parts = ? WHERE id = ?", (__import__("json").dumps(new), m1))
            assert source_digest(lookup_message(rt.store, s.id, m1)) != d1
        got = body(await _ctx(s, {"action": "get"}))
        assert got["task_context"]["sources"][0]["state"] == "stale" and "Current user instructions win" in got["note"]


async def test_declarations_by_action(rt: zuno.Runtime) -> None:
    tool = rt.surface.tools["task_context"]
    for action, effect in (("get", "ReadOnly"), ("update", "SideEffecting"), ("replace", "SideEffecting")):
        args = (
            {"action": action, "objective": "o", "task_kind": "delivery", "source_message_ids": ["m"]}
            if action == "replace"
            else {"action": action}
        )
        decl = tool.classify(tool.Args.model_validate(args)).as_dict()
        assert decl["effect"] == effect
        if effect == "ReadOnly":
            assert decl == {"effect": "ReadOnly", "replay": "Safe", "concurrency": "ParallelSafe"}
        else:
            assert decl == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}
    rt.store.close()


async def test_the_context_is_bounded(rt: zuno.Runtime) -> None:
    from zuno.tools.state.task_context import MAX_ITEMS

    async with rt, rt.session() as s:
        m1 = record_message(rt.store, s.id, [{"type": "text", "text": "go"}])
        await _ctx(
            s,
            {
                "action": "replace",
                "objective": "o",
                "task_kind": "inspection",
                "source_message_ids": [m1],
                "prohibitions": [f"p{i}" for i in range(MAX_ITEMS)],
            },
        )
        rec = await _ctx(s, {"action": "update", "expected_revision": 1, "prohibitions": ["one more"]})
        assert (
            rec.metadata["refusal"]["kind"] == "ContextTooLarge" and rec.metadata["refusal"]["field"] == "prohibitions"
        )

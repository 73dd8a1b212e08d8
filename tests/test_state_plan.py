"""plan_get / plan_update: the action union refused at admission, revisions, push/pop restoring the
exact parent, terminal statuses, replayed delivery, two writers in two processes, fingerprints."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import zuno
from zuno.tools.state import plan_instruction, read_plan

from statehelp import body, call

STEPS = [{"title": "read the code"}, {"title": "change it"}]


async def test_a_call_naming_no_operation_is_refused_at_admission(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        for args in ({"steps": STEPS, "objective": "x"}, {"action": "rewrite", "objective": "x"}):
            rec = await call(s, "plan_update", args)
            assert (rec.outcome, rec.block_kind) == ("blocked", "invalid_arguments")
            said = "argument 'action' is required" if "action" not in args else "'action' is \"rewrite\", which is not"
            assert said in rec.text and "create, patch, append, push, pop" in rec.text
        rec = await call(s, "plan_update", {"action": "patch", "steps": [{"id": "s1", "status": "completed"}]})
        assert rec.block_kind == "invalid_arguments" and "expected_revision" in rec.text
        assert read_plan(rt.store, s.id) == {"plan": None, "revision": 0}
        schema = rt.surface.tools["plan_update"].input_schema()
        assert schema["required"] == ["action"]
        assert schema["properties"]["action"]["enum"] == ["create", "patch", "append", "push", "pop"]
        # One object (no top-level oneOf: the provider APIs refuse it); the action's description
        # names the fields each operation needs.
        assert "oneOf" not in schema and "anyOf" not in schema
        # (expected_revision: every action but create, so pop's need is said there too)
        assert schema["properties"]["action"]["description"] == (
            "Required. expected_revision (all but create); create: objective, steps[].title; patch: steps[].id; "
            "append: steps[].title; push: step_id, objective, steps[].title"
        )


async def test_revision_rules(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        assert body(await call(s, "plan_get"))["plan"] is None
        assert plan_instruction(rt.store, s.id) == "Required"
        rec = await call(s, "plan_update", {"action": "create", "objective": "fix the bug", "steps": STEPS})
        assert rec.outcome == "ok" and rec.metadata["revision"] == 1
        assert rec.metadata["invalidatesContext"] is True and rec.metadata["planInstruction"] == "Maintain"
        assert plan_instruction(rt.store, s.id) == "Maintain"
        # replacing the root without the revision is stale, and names the current revision
        rec = await call(s, "plan_update", {"action": "create", "objective": "new", "steps": STEPS})
        assert rec.outcome == "error" and rec.metadata["refusal"]["kind"] == "StaleRevision"
        assert rec.metadata["refusal"]["currentRevision"] == 1 and "expected_revision 1" in rec.text
        rec = await call(s, "plan_update", {"action": "append", "expected_revision": 7, "steps": STEPS})
        assert rec.metadata["refusal"] == {
            "kind": "StaleRevision",
            "requiredAction": rec.metadata["refusal"]["requiredAction"],
            "resource": "Plan",
            "expectedRevision": 7,
            "currentRevision": 1,
        }
        rec = await call(
            s, "plan_update", {"action": "create", "objective": "new", "steps": STEPS, "expected_revision": 1}
        )
        assert rec.outcome == "ok" and rec.metadata["revision"] == 2
        got = body(await call(s, "plan_get"))
        assert got["plan"]["objective"] == "new" and [x["id"] for x in got["plan"]["steps"]] == ["s3", "s4"]
        # a patch of a plan that does not exist is refused as such
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        rec = await call(s, "plan_update", {"action": "pop", "expected_revision": 1})
        assert rec.metadata["refusal"]["kind"] == "NotFound"


async def test_push_and_pop_restore_the_exact_parent(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "ship", "steps": STEPS})
        await call(
            s,
            "plan_update",
            {
                "action": "patch",
                "expected_revision": 1,
                "steps": [{"id": "s1", "status": "in_progress", "notes": "started"}],
            },
        )
        parent = body(await call(s, "plan_get"))["plan"]
        rec = await call(
            s,
            "plan_update",
            {
                "action": "push",
                "expected_revision": 2,
                "step_id": "s1",
                "objective": "understand the parser",
                "steps": [{"title": "read lexer"}],
            },
        )
        assert rec.outcome == "ok", rec.text
        got = body(await call(s, "plan_get"))
        assert got["focus"] == ["p1", "p2"]
        # append goes to the focused child, patch reaches any step by id
        await call(s, "plan_update", {"action": "append", "expected_revision": 3, "steps": [{"title": "read parser"}]})
        await call(
            s,
            "plan_update",
            {
                "action": "patch",
                "expected_revision": 4,
                "steps": [{"id": "s3", "status": "completed"}, {"id": "s4", "status": "completed"}],
            },
        )
        rec = await call(s, "plan_update", {"action": "pop", "expected_revision": 5})
        assert rec.outcome == "ok" and rec.metadata["result"]["closed"] == "p2"
        after = body(await call(s, "plan_get"))
        assert after["focus"] == ["p1"]
        restored = after["plan"]
        child = restored["steps"][0].pop("children")
        assert restored == parent  # exactly the parent as it was before the push, nothing retransmitted
        assert [x["status"] for x in child[0]["steps"]] == ["completed", "completed"]
        rec = await call(s, "plan_update", {"action": "pop", "expected_revision": 6})
        assert rec.metadata["refusal"]["kind"] == "NothingToPop"


async def test_completed_and_superseded_are_terminal(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": STEPS})
        rec = await call(
            s,
            "plan_update",
            {
                "action": "patch",
                "expected_revision": 1,
                "steps": [{"id": "s1", "status": "completed"}, {"id": "s2", "status": "superseded"}],
            },
        )
        assert rec.outcome == "ok"
        for sid, status in (("s1", "pending"), ("s1", "in_progress"), ("s2", "completed"), ("s2", "blocked")):
            rec = await call(
                s, "plan_update", {"action": "patch", "expected_revision": 2, "steps": [{"id": sid, "status": status}]}
            )
            assert rec.metadata["refusal"]["kind"] == "InvalidTransition", rec.text
            assert "terminal" in rec.text
        rec = await call(
            s, "plan_update", {"action": "patch", "expected_revision": 2, "steps": [{"id": "s1", "title": "renamed"}]}
        )
        assert rec.metadata["refusal"]["kind"] == "TerminalStep"
        rec = await call(
            s,
            "plan_update",
            {"action": "push", "expected_revision": 2, "step_id": "s1", "objective": "x", "steps": STEPS},
        )
        assert rec.metadata["refusal"]["kind"] == "TerminalStep"
        assert read_plan(rt.store, s.id)["revision"] == 2


async def test_a_replayed_delivery_is_applied_once(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": STEPS})
        args = {"action": "append", "expected_revision": 1, "steps": [{"title": "once"}]}
        first = await call(s, "plan_update", args, id="call-7")
        again = await call(s, "plan_update", args, id="call-7")
        assert first.outcome == again.outcome == "ok"
        assert again.metadata["replayed"] is True and again.metadata["revision"] == first.metadata["revision"] == 2
        titles = [x["title"] for x in read_plan(rt.store, s.id)["plan"]["steps"]]
        assert titles.count("once") == 1
        # the same call id with a different body is not a replay
        other = await call(s, "plan_update", {**args, "steps": [{"title": "other"}]}, id="call-7")
        assert other.metadata["refusal"]["kind"] == "ChangedDelivery"


async def test_fingerprints_are_stable_across_reads_and_change_with_a_mutation(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": STEPS})
        a = await call(s, "plan_get")
        b = await call(s, "plan_get", {"intent": "checking the plan again"})
        assert a.metadata["progressFingerprint"] == b.metadata["progressFingerprint"]
        await call(s, "plan_update", {"action": "patch", "expected_revision": 1, "steps": [{"id": "s1", "notes": "n"}]})
        c = await call(s, "plan_get")
        assert c.metadata["progressFingerprint"] != a.metadata["progressFingerprint"]
        sections = {n: fn(rt.store, s.id) for n, fn in rt_refreshers()}
        assert sections["plan"] is not None and sections["plan"].fingerprint == c.metadata["progressFingerprint"]
        assert sections["plan"].runnable is False  # nothing in progress
        await call(
            s,
            "plan_update",
            {"action": "patch", "expected_revision": 2, "steps": [{"id": "s1", "status": "in_progress"}]},
        )
        section = dict(rt_refreshers())["plan"](rt.store, s.id)
        assert section.runnable is True and "s1 in_progress: read the code [main]" in section.text


def rt_refreshers():
    from zuno.surface import default_registry

    return [(n, fn) for n, fn in default_registry().refreshers if n in ("goal", "plan", "todo")]


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from zuno.store import Store
    from zuno.surface import default_registry
    from zuno.tools.state import docstore, plan
    db, sid, who, go = sys.argv[1:5]
    store = Store(Path(db), default_registry().migrations)
    args = plan.PlanUpdateArgs.model_validate(
        {"action": "append", "expected_revision": 1, "steps": [{"title": "by " + who}]}).root
    while not Path(go).exists():
        time.sleep(0.001)
    try:
        result, _ = docstore.mutate(store, plan.scope_of(sid), plan.KIND, docstore.Delivery(who, args.model_dump()),
                                    lambda d: plan.apply_update(d, args, who))
        print(json.dumps({"won": result}))
    except docstore.StateRefusal as r:
        print(json.dumps({"refused": r.to_metadata()}))
    store.close()
    """
)


@pytest.mark.parametrize("round_", range(3))
def test_two_processes_with_the_same_expected_revision_exactly_one_wins(workspace: Path, round_: int) -> None:
    async def setup() -> tuple[str, str]:
        async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
            await call(s, "plan_update", {"action": "create", "objective": "o", "steps": STEPS})
            return s.id, str(rt.store.path)

    sid, db = asyncio.run(setup())
    go = workspace / f"go-{round_}"
    env = {"PYTHONPATH": str(Path(zuno.__file__).parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, db, sid, who, str(go)],
            stdout=subprocess.PIPE,
            text=True,
            env={**env, "PATH": "/usr/bin:/bin"},
        )
        for who in ("writer-a", "writer-b")
    ]
    time.sleep(1.0)  # both have opened the store and are spinning on the go file
    go.touch()
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    won = [o for o in outs if "won" in o]
    refused = [o["refused"] for o in outs if "refused" in o]
    assert len(won) == 1 and len(refused) == 1, outs
    assert won[0]["won"]["revision"] == 2
    assert refused[0]["kind"] == "StaleRevision" and refused[0]["currentRevision"] == 2
    rt = zuno.Runtime(root=workspace)
    titles = [x["title"] for x in read_plan(rt.store, sid)["plan"]["steps"]]
    rt.store.close()
    assert len([t for t in titles if t.startswith("by ")]) == 1


async def test_a_delivery_committed_before_a_crash_is_not_applied_again(workspace: Path) -> None:
    """The process died after the mutation committed and before the call settled: the client sends
    the same call again (same id, same body) and gets the stored result; nothing is applied twice."""
    from zuno.tools.state import docstore, plan

    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": STEPS})
        args = {"action": "append", "expected_revision": 1, "steps": [{"title": "exactly once"}]}
        validated = plan.PlanUpdateArgs.model_validate(args)
        committed, _ = docstore.mutate(
            rt.store,
            plan.scope_of(s.id),
            plan.KIND,
            docstore.Delivery("call-lost", ["plan_update", validated.root.model_dump(mode="json")]),
            lambda d: plan.apply_update(d, validated.root, "main"),
        )
        again = await call(s, "plan_update", args, id="call-lost")
        assert again.outcome == "ok" and again.metadata["replayed"] is True
        assert again.metadata["revision"] == committed["revision"] == 2
        titles = [x["title"] for x in read_plan(rt.store, s.id)["plan"]["steps"]]
        assert titles.count("exactly once") == 1


async def test_the_plan_is_bounded(workspace: Path) -> None:
    from zuno.tools.state.plan import PLAN_MAX_DEPTH, PLAN_MAX_STEPS

    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        many = [{"title": f"step {i}"} for i in range(100)]
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": many})
        rev = 1
        for _ in range(PLAN_MAX_STEPS // 100 - 1):
            rec = await call(s, "plan_update", {"action": "append", "expected_revision": rev, "steps": many})
            assert rec.outcome == "ok"
            rev += 1
        rec = await call(
            s, "plan_update", {"action": "append", "expected_revision": rev, "steps": [{"title": "one more"}]}
        )
        assert (
            rec.metadata["refusal"]["kind"] == "PlanTooLarge" and rec.metadata["refusal"]["steps"] == PLAN_MAX_STEPS + 1
        )
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": STEPS})
        for depth in range(1, PLAN_MAX_DEPTH):
            step_id = read_plan(rt.store, s.id)
            focused = _focused(step_id)
            rec = await call(
                s,
                "plan_update",
                {
                    "action": "push",
                    "expected_revision": depth,
                    "step_id": focused,
                    "objective": f"level {depth}",
                    "steps": [{"title": "x"}],
                },
            )
            assert rec.outcome == "ok", rec.text
        rec = await call(
            s,
            "plan_update",
            {
                "action": "push",
                "expected_revision": PLAN_MAX_DEPTH,
                "step_id": _focused(read_plan(rt.store, s.id)),
                "objective": "too deep",
                "steps": [{"title": "x"}],
            },
        )
        assert rec.metadata["refusal"]["kind"] == "PlanTooDeep"


def _focused(view: dict) -> str:
    """The first step id of the focused Plan."""
    plan = view["plan"]
    for pid in view["focus"][1:]:
        plan = next(c for s in plan["steps"] for c in s.get("children", []) if c["id"] == pid)
    return plan["steps"][0]["id"]

"""A Plan within its own bounds is always seen inline: its rendering (plan_get, and plan_update's
result) fits tool_output.max_lines and max_bytes, so the output limits never withhold the model's
own Plan into a file. The line count is bounded by the compact rendering (one line per step, two
per Plan); the bytes by a budget a mutation may not grow past (PlanTooLarge)."""

from __future__ import annotations

import json
from pathlib import Path

import zuno
from zuno import limits
from zuno.output import count_lines
from zuno.tools.state import fits, plan
from zuno.tools.state.docstore import Doc

from statehelp import body, call


def _counted(rec) -> int:
    """The bytes the budget counts for this plan_get: its revision as ten digits (fits.REVISION_ALLOWANCE),
    so that the next revisions never push a Plan at its budget over."""
    revision = json.loads(rec.text)["revision"]
    return len(rec.text.encode()) + len(str(fits.REVISION_ALLOWANCE)) - len(str(revision))


def _inline(rec) -> dict:
    assert rec.outcome == "ok", rec.text
    assert not rec.text.startswith("[output withheld"), rec.text[:300]
    return body(rec)


async def test_a_plan_of_the_most_steps_is_returned_inline(workspace: Path) -> None:
    """500 steps (the step bound) with ordinary titles: before, plan_get rendered about 2,500 lines
    (indented JSON) and was withheld over tool_output.max_lines = 2000."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        many = [{"title": f"step {i}: read the header"} for i in range(100)]
        rec = await call(s, "plan_update", {"action": "create", "objective": "o", "steps": many})
        _inline(rec)
        for rev in range(1, plan.PLAN_MAX_STEPS // 100):
            rec = await call(s, "plan_update", {"action": "append", "expected_revision": rev, "steps": many})
            _inline(rec)
        got = _inline(await call(s, "plan_get"))
        assert len(got["plan"]["steps"]) == plan.PLAN_MAX_STEPS
        rec = await call(s, "plan_get")
        assert count_lines(rec.text.encode()) <= plan.PLAN_MAX_STEPS + 4
        assert len(rec.text.encode()) <= plan.PLAN_VIEW_MAX_BYTES


def test_the_line_count_is_bounded_for_every_shape_of_tree() -> None:
    """The worst shape for lines: every step but one a one-step child Plan (as many Plans as steps).
    Two lines per Plan and one per step: at most 3 * PLAN_MAX_STEPS + 1, under max_lines."""
    n = plan.PLAN_MAX_STEPS
    plans = {"p1": {"id": "p1", "objective": "root", "parent": None, "steps": []}}
    root_step = {"id": "s1", "title": "t", "status": "pending", "owner": None, "notes": None, "children": []}
    plans["p1"]["steps"].append(root_step)
    for i in range(2, n + 1):
        pid = f"p{i}"
        plans[pid] = {
            "id": pid,
            "objective": "child\nwith a newline",
            "parent": {"plan": "p1", "step": "s1"},
            "steps": [{"id": f"s{i}", "title": "t\n\n", "status": "pending", "owner": None, "notes": "a\nb\nc"}],
        }
        root_step["children"].append(pid)
    doc = Doc(7, {"plans": plans, "focus": ["p1"], "next_step": n, "next_plan": n, "replaced": []})
    text = plan.render_view(doc)
    assert json.loads(text) == plan.view(doc)  # the same document, only laid out compactly
    assert count_lines(text.encode()) <= 2 * n + n + 1 < limits.DEFAULT_MAX_LINES
    # a deep chain renders as JSON too
    plans2 = {}
    for d in range(1, plan.PLAN_MAX_DEPTH + 1):
        step = {"id": f"s{d}", "title": "t", "status": "pending", "owner": None, "notes": None}
        if d < plan.PLAN_MAX_DEPTH:
            step["children"] = [f"p{d + 1}"]
        plans2[f"p{d}"] = {"id": f"p{d}", "objective": "o", "parent": None, "steps": [step, dict(step, id=f"x{d}")]}
    for p in plans2.values():
        p["steps"][1].pop("children", None)
    doc2 = Doc(3, {"plans": plans2, "focus": [f"p{d}" for d in range(1, 9)], "next_step": 9, "next_plan": 8})
    assert json.loads(plan.render_view(doc2)) == plan.view(doc2)
    assert json.loads(plan.render_view(Doc(0, None))) == {"plan": None, "revision": 0}


async def test_the_plan_byte_budget_is_crossed_by_one(workspace: Path) -> None:
    """Each step within its own bounds (notes of 4000 characters), but thirteen of them: before, the
    Plan was accepted and every later plan_get withheld over tool_output.max_bytes."""
    note = "n" * 4000
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        # in_progress and owned: the document is already as large as status changes could make it
        steps = [{"title": f"step {i}", "notes": note, "status": "in_progress"} for i in range(12)]
        steps.append({"title": "last", "notes": "a", "status": "in_progress"})
        _inline(await call(s, "plan_update", {"action": "create", "objective": "o", "steps": steps}))
        size = _counted(await call(s, "plan_get"))
        room = plan.PLAN_VIEW_MAX_BYTES - size
        assert 0 < room < 4000
        # exactly at the budget: accepted, and seen inline (plan_update's result too)
        patch = {"action": "patch", "expected_revision": 1, "steps": [{"id": "s13", "notes": "a" * (1 + room)}]}
        _inline(await call(s, "plan_update", patch))
        got = await call(s, "plan_get")
        assert _counted(got) == plan.PLAN_VIEW_MAX_BYTES
        _inline(got)
        # one byte more: refused, naming the size, the limit and what to do; nothing changed
        patch = {"action": "patch", "expected_revision": 2, "steps": [{"id": "s13", "notes": "a" * (2 + room)}]}
        rec = await call(s, "plan_update", patch)
        assert rec.outcome == "error" and rec.metadata["refusal"]["kind"] == "PlanTooLarge", rec.text
        assert rec.metadata["refusal"]["bytes"] == plan.PLAN_VIEW_MAX_BYTES + 1
        assert rec.metadata["refusal"]["limit"] == plan.PLAN_VIEW_MAX_BYTES
        assert "tool_output.max_bytes" in rec.text and "shorter" in rec.text
        assert _inline(await call(s, "plan_get"))["revision"] == 2
        done = [{"id": f"s{i}", "status": "completed"} for i in range(1, 14)]
        _inline(await call(s, "plan_update", {"action": "patch", "expected_revision": 2, "steps": done}))


async def test_a_plan_at_its_budget_can_still_have_every_step_started(workspace: Path) -> None:
    """The budget counts each open step as in_progress and owned, so a pending Plan the host
    accepted never crosses the limit when the model starts its steps (in_progress is the longest
    status, and it adopts an unowned step)."""
    note = "n" * 4000
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        steps = [{"title": f"step {i}", "notes": note} for i in range(13)]
        rec = await call(s, "plan_update", {"action": "create", "objective": "o", "steps": steps})
        refusal = rec.metadata["refusal"]
        assert refusal["kind"] == "PlanTooLarge" and refusal["limit"] == plan.PLAN_VIEW_MAX_BYTES
        steps[-1]["notes"] = "n" * (4000 - (refusal["bytes"] - refusal["limit"]))
        _inline(await call(s, "plan_update", {"action": "create", "objective": "o", "steps": steps}))
        assert _counted(await call(s, "plan_get")) < plan.PLAN_VIEW_MAX_BYTES
        started = [{"id": f"s{i}", "status": "in_progress"} for i in range(1, 14)]
        _inline(await call(s, "plan_update", {"action": "patch", "expected_revision": 1, "steps": started}))
        got = await call(s, "plan_get")
        assert _counted(got) == plan.PLAN_VIEW_MAX_BYTES
        assert {x["owner"] for x in _inline(got)["plan"]["steps"]} == {"main"}
        superseded = [{"id": f"s{i}", "status": "superseded"} for i in range(1, 14)]
        _inline(await call(s, "plan_update", {"action": "patch", "expected_revision": 2, "steps": superseded}))


async def test_a_lower_configured_limit_bounds_the_plan_too(workspace: Path) -> None:
    """tool_output.max_lines / max_bytes lowered in config: the Plan's budget follows them, so a
    Plan the host accepted is still one the model sees inline."""
    cfg = {"tool_output": {"max_lines": 12, "max_bytes": 4000}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        steps = [{"title": f"step {i}"} for i in range(9)]
        _inline(await call(s, "plan_update", {"action": "create", "objective": "o", "steps": steps}))
        _inline(await call(s, "plan_get"))
        rec = await call(s, "plan_update", {"action": "append", "expected_revision": 1, "steps": [{"title": "x"}]})
        assert rec.metadata["refusal"]["kind"] == "PlanTooLarge", rec.text
        assert "tool_output.max_lines" in rec.text
        _inline(await call(s, "plan_get"))
        rec = await call(
            s,
            "plan_update",
            {"action": "patch", "expected_revision": 1, "steps": [{"id": "s1", "notes": "z" * 3900}]},
        )
        assert rec.metadata["refusal"]["kind"] == "PlanTooLarge" and "tool_output.max_bytes" in rec.text

"""plan_get / plan_update: the session's durable strategic Plan, a tree.

The document holds every Plan of the tree by id: the root, and a child opened by ``push`` under
one step of the focused Plan. ``focus`` is the path from the root to the Plan being worked on;
``pop`` restores the exact parent (its steps, statuses and revision history untouched) without
the model retransmitting it. Step ids are assigned by the host (``s1``, ``s2``…) and never reused.

Statuses and transitions are documented in docs/state.md; ``completed`` and ``superseded`` are
terminal.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, RootModel

from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.state import docstore, fits
from zuno.tools.state.actions import (
    MUTATION,
    READ,
    ActionTool,
    Owner,
    Text,
    action_union,
    inner,
    mutate_for_call,
    mutation_output,
)
from zuno.tools.state.docstore import Doc, StateRefusal, check_revision, named

KIND = "plan"
StepStatus = Literal["pending", "in_progress", "blocked", "completed", "superseded"]
TERMINAL = frozenset({"completed", "superseded"})
# Allowed transitions (a status to itself is a no-op and always allowed).
TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"in_progress", "blocked", "completed", "superseded"}),
    "in_progress": frozenset({"pending", "blocked", "completed", "superseded"}),
    "blocked": frozenset({"pending", "in_progress", "superseded"}),
    "completed": frozenset(),
    "superseded": frozenset(),
}
# Bounds of one session's Plan document (Zuno's numbers; the spec names none): steps across the
# whole tree, and how deep push may nest child Plans.
PLAN_MAX_STEPS = 500
PLAN_MAX_DEPTH = 8
# How many replaced roots (id and objective) a Plan remembers after creates for new objectives. The
# record is never shown; before, every create added up to 2000 characters to it, so a model that kept
# creating grew the stored document (read and rewritten whole on every plan_update) without limit.
PLAN_MAX_REPLACED = 20
# The Plan is the model's own working state, so it must always come back inline: what plan_get
# returns (and plan_update, after its one head line) fits the output limits, never withheld into
# a file. Lines: the rendering is compact (render_view: one line per step, two per Plan, the root's
# opening on the first), so a tree of PLAN_MAX_STEPS steps is at most 3 * 500 lines, under the
# default max_lines (2000). Bytes: no mutation may grow the rendering past PLAN_VIEW_MAX_BYTES — the
# default max_bytes less the head line's allowance — nor past a lower configured tool_output limit
# (fits.budget).
PLAN_HEAD_ALLOWANCE_BYTES = fits.HEAD_ALLOWANCE_BYTES
PLAN_VIEW_MAX_BYTES = fits.VIEW_MAX_BYTES
PLAN_VIEW_MAX_LINES = fits.VIEW_MAX_LINES
# The metadata key a successful plan_update carries: the explicit-Plan-mode instruction the next
# provider request uses ("Maintain" after any successful Plan mutation).
PLAN_INSTRUCTION_KEY = "planInstruction"


def scope_of(session_id: str) -> str:
    return f"session:{session_id}"


def agent_of(ctx: ToolContext) -> str:
    return ctx.config.agent.name or "main"


class NewStep(ToolArgs):
    title: Text = Field(min_length=1, max_length=500)
    status: StepStatus = "pending"
    owner: Owner | None = None
    notes: str | None = Field(None, max_length=4000)


class StepPatch(ToolArgs):
    id: str = Field(description="patch: a step id from plan_get")
    title: Text | None = Field(None, min_length=1, max_length=500)
    status: StepStatus | None = None
    owner: Owner | None = None
    notes: str | None = Field(None, max_length=4000)


class Create(ToolArgs):
    """Start the first Plan, or replace the root for a genuinely new objective."""

    action: Literal["create"]
    objective: Text = Field(min_length=1, max_length=2000)
    steps: list[NewStep] = Field(min_length=1, max_length=100)
    expected_revision: int | None = Field(None, ge=0)


class Patch(ToolArgs):
    """Change only the named step ids (of any Plan in the tree)."""

    action: Literal["patch"]
    expected_revision: int = Field(ge=1)
    steps: list[StepPatch] = Field(min_length=1, max_length=100)


class Append(ToolArgs):
    """Add steps to the end of the focused Plan; the host assigns their ids."""

    action: Literal["append"]
    expected_revision: int = Field(ge=1)
    steps: list[NewStep] = Field(min_length=1, max_length=100)


class Push(ToolArgs):
    """Open a focused child Plan under a step of the focused Plan."""

    action: Literal["push"]
    expected_revision: int = Field(ge=1)
    step_id: str
    objective: Text = Field(min_length=1, max_length=2000)
    steps: list[NewStep] = Field(min_length=1, max_length=100)


class Pop(ToolArgs):
    """Close the focused child Plan and restore its exact parent."""

    action: Literal["pop"]
    expected_revision: int = Field(ge=1)


ACTIONS = ["create", "patch", "append", "push", "pop"]


class PlanUpdateArgs(RootModel[action_union(Create, Patch, Append, Push, Pop)]):  # type: ignore[misc]
    pass


class PlanGetArgs(ToolArgs):
    pass


# -- the document ---------------------------------------------------------------------------------


def _new_step(body: dict[str, Any], s: NewStep, agent: str) -> dict[str, Any]:
    body["next_step"] += 1
    owner = s.owner if s.owner is not None else (agent if s.status == "in_progress" else None)
    return {"id": f"s{body['next_step']}", "title": s.title, "status": s.status, "owner": owner, "notes": s.notes}


def _new_plan(body: dict[str, Any], objective: str, steps: list[NewStep], parent: dict[str, str] | None, agent: str):
    body["next_plan"] += 1
    pid = f"p{body['next_plan']}"
    body["plans"][pid] = {
        "id": pid,
        "objective": objective,
        "parent": parent,
        "steps": [_new_step(body, s, agent) for s in steps],
    }
    return pid


def _find_step(body: dict[str, Any], step_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    for plan in body["plans"].values():
        for step in plan["steps"]:
            if step["id"] == step_id:
                return plan, step
    return None


def _transition(step: dict[str, Any], new: str) -> None:
    old = step["status"]
    if new == old:
        return
    if new not in TRANSITIONS[old]:
        allowed = sorted(TRANSITIONS[old])
        raise StateRefusal(
            "InvalidTransition",
            f"step {step['id']} is {old}" + (" (terminal)" if old in TERMINAL else "") + f"; it cannot become {new}.",
            (
                "Leave a terminal step as it is; append a new step for further work."
                if old in TERMINAL
                else f"Use one of: {', '.join(allowed)}."
            ),
            stepId=step["id"],
            status=old,
            requested=new,
        )
    step["status"] = new


def _at_most(doc: Doc, agent: str) -> Doc:
    """The document as large as status changes alone could make it: every open step in_progress
    (the longest status) and owned (in_progress adopts an unowned step for ``agent``). Measuring
    this, not the document as it is, keeps a Plan the budget accepted one whose steps can still all
    be started and finished without ever crossing it."""
    body = json.loads(json.dumps(doc.body))
    for p in body["plans"].values():
        for step in p["steps"]:
            if step["status"] not in TERMINAL:
                step["status"] = "in_progress"
                step["owner"] = step.get("owner") or agent
    return Doc(fits.REVISION_ALLOWANCE, body)


def _measure(doc: Doc, agent: str) -> tuple[int, int]:
    return fits.measure(render_view(_at_most(doc, agent)))


def apply_update(
    doc: Doc, a: Any, agent: str, budget: tuple[int, int] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    body, result = _apply(doc, a, agent)
    total = sum(len(p["steps"]) for p in body["plans"].values())
    if total > PLAN_MAX_STEPS:
        raise StateRefusal(
            "PlanTooLarge",
            f"the Plan would hold {total} steps; a session's Plan holds at most {PLAN_MAX_STEPS}.",
            "Keep the Plan strategic: fewer, larger steps, or create a Plan for the new objective.",
            steps=total,
            limit=PLAN_MAX_STEPS,
        )
    fits.check(
        "PlanTooLarge",
        "the Plan",
        _measure(Doc(doc.revision + 1, body), agent),
        _measure(doc, agent) if doc.body is not None else None,
        budget or fits.budget(),
        "Keep titles and notes shorter (the details belong in Todos or Notes), fewer steps, "
        "or create a Plan for the new objective.",
        " (counting every open step as in_progress and owned, as it may yet be)",
    )
    return body, result


def _apply(doc: Doc, a: Any, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    check_revision(doc, a.expected_revision, "Plan", "plan_get", creating=a.action == "create")
    body: dict[str, Any]
    if a.action == "create":
        if doc.body is None:
            body = {"plans": {}, "focus": [], "next_step": 0, "next_plan": 0, "replaced": []}
        else:
            body = json.loads(json.dumps(doc.body))
            old_root = body["focus"][0]
            body["replaced"].append({"id": old_root, "objective": body["plans"][old_root]["objective"]})
            del body["replaced"][:-PLAN_MAX_REPLACED]
            body["plans"] = {}
        root = _new_plan(body, a.objective, a.steps, None, agent)
        body["focus"] = [root]
        return body, {"action": "create", "plan": root}
    body = json.loads(json.dumps(doc.body))
    focused = body["plans"][body["focus"][-1]]
    if a.action == "patch":
        seen: set[str] = set()
        for p in a.steps:
            if p.id in seen:
                raise StateRefusal(
                    "DuplicateStep", f"step {named(p.id)} is named twice.", "Name each step once.", stepId=named(p.id)
                )
            seen.add(p.id)
            found = _find_step(body, p.id)
            if found is None:
                raise StateRefusal(
                    "UnknownStep",
                    f"there is no step {named(p.id)}.",
                    "Use a step id plan_get returned.",
                    stepId=named(p.id),
                )
            _plan, step = found
            if step["status"] in TERMINAL and (p.title is not None or p.owner is not None or p.notes is not None):
                if p.status is None or p.status == step["status"]:
                    raise StateRefusal(
                        "TerminalStep",
                        f"step {p.id} is {step['status']} (terminal) and cannot be edited.",
                        "Append a new step for further work.",
                        stepId=p.id,
                        status=step["status"],
                    )
            if p.status is not None:
                _transition(step, p.status)
            for key in ("title", "owner", "notes"):
                value = getattr(p, key)
                if value is not None:
                    step[key] = value
            if step["status"] == "in_progress" and not step.get("owner"):
                step["owner"] = agent  # marking a step in_progress adopts it
        return body, {"action": "patch", "steps": sorted(seen)}
    if a.action == "append":
        added = [_new_step(body, s, agent) for s in a.steps]
        focused["steps"].extend(added)
        return body, {"action": "append", "steps": [s["id"] for s in added]}
    if a.action == "push" and len(body["focus"]) >= PLAN_MAX_DEPTH:
        raise StateRefusal(
            "PlanTooDeep",
            f"the focused Plan is already {len(body['focus'])} levels deep (at most {PLAN_MAX_DEPTH}).",
            "Pop back to a parent, or append steps to the focused Plan.",
            limit=PLAN_MAX_DEPTH,
        )
    if a.action == "push":
        target = next((s for s in focused["steps"] if s["id"] == a.step_id), None)
        if target is None:
            raise StateRefusal(
                "UnknownStep",
                f"step {named(a.step_id)} is not a step of the focused Plan {focused['id']}.",
                "Push under a step of the focused Plan (plan_get shows it), or pop first.",
                stepId=named(a.step_id),
            )
        if target["status"] in TERMINAL:
            raise StateRefusal(
                "TerminalStep",
                f"step {a.step_id} is {target['status']} (terminal); a child Plan cannot open under it.",
                "Push under a step that is still open.",
                stepId=a.step_id,
                status=target["status"],
            )
        child = _new_plan(body, a.objective, a.steps, {"plan": focused["id"], "step": a.step_id}, agent)
        target.setdefault("children", []).append(child)
        body["focus"].append(child)
        return body, {"action": "push", "plan": child, "parent": focused["id"]}
    # pop
    if len(body["focus"]) == 1:
        raise StateRefusal(
            "NothingToPop",
            "the focused Plan is the root; there is no parent to restore.",
            "Use patch or append on the root, or create for a genuinely new objective.",
        )
    closed = body["focus"].pop()
    return body, {"action": "pop", "closed": closed, "plan": body["focus"][-1]}


# -- reading ----------------------------------------------------------------------------------------


def view(doc: Doc) -> dict[str, Any]:
    """What plan_get returns: null before the first create, else the tree with its focus."""
    if doc.body is None:
        return {"plan": None, "revision": 0}
    body = doc.body
    focus = body["focus"]

    def render(pid: str) -> dict[str, Any]:
        plan = body["plans"][pid]
        steps = []
        for s in plan["steps"]:
            item = {k: s[k] for k in ("id", "title", "status", "owner", "notes") if s.get(k) is not None}
            if s.get("children"):
                item["children"] = [render(c) for c in s["children"]]
            steps.append(item)
        return {"id": pid, "objective": plan["objective"], "steps": steps}

    return {"revision": doc.revision, "focus": list(focus), "plan": render(focus[0])}


def render_view(doc: Doc) -> str:
    """``view(doc)`` as JSON text, laid out compactly: each step on one line (a newline inside a
    title or notes is escaped), each Plan's opening and closing on one line each, the root's
    opening on the first line. So a tree of S steps in P Plans is at most 2P + S lines (P <= S)."""
    data = view(doc)
    if data["plan"] is None:
        return fits.j(data)
    lines: list[str] = []

    def plan_lines(p: dict[str, Any], pad: str, opening: str, closing: str) -> None:
        head = {"id": p["id"], "objective": p["objective"]}
        lines.append(opening + fits.j(head)[:-1] + ', "steps": [')
        steps = p["steps"]
        for i, step in enumerate(steps):
            comma = "," if i < len(steps) - 1 else ""
            children = step.get("children")
            if not children:
                lines.append(pad + " " + fits.j(step) + comma)
                continue
            leaf = {k: v for k, v in step.items() if k != "children"}
            lines.append(pad + " " + fits.j(leaf)[:-1] + ', "children": [')
            for j, child in enumerate(children):
                plan_lines(child, pad + "  ", pad + "  ", "," if j < len(children) - 1 else "]}" + comma)
        lines.append(pad + "]}" + closing)

    opening = fits.j({"revision": data["revision"], "focus": data["focus"]})[:-1] + ', "plan": '
    plan_lines(data["plan"], "", opening, "}")
    return "\n".join(lines)


def fingerprint(doc: Doc) -> str:
    return docstore.digest({"kind": KIND, "revision": doc.revision, "body": doc.body})


def focused_plan(doc: Doc) -> dict[str, Any] | None:
    if doc.body is None:
        return None
    return doc.body["plans"][doc.body["focus"][-1]]


# -- the tools ------------------------------------------------------------------------------------


class PlanGetTool(ActionTool):
    name = "plan_get"
    description = (
        "The durable Plan tree (steps, child Plans, focus) and its revision; plan null before the first create. "
        "Call it just before every plan_update and copy the revision into expected_revision."
    )
    Args = PlanGetArgs
    declarations = READ

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        doc = docstore.read(ctx.store, scope_of(ctx.session_id), KIND)
        return ToolOutput(
            text=render_view(doc),
            metadata={"revision": doc.revision, "progressFingerprint": fingerprint(doc)},
        )


class PlanUpdateTool(ActionTool):
    name = "plan_update"
    description = (
        "Change the durable Plan. create: the first Plan, or a new root for a genuinely new objective; patch: "
        "only the named steps; append: steps on the focused Plan; push: a focused child Plan under step_id; pop: "
        "back to the exact parent. expected_revision: plan_get's (only create after a null plan omits it). "
        "completed and superseded are terminal; in_progress adopts an unowned step."
    )
    Args = PlanUpdateArgs
    declarations = MUTATION
    ACTIONS: ClassVar[list[str]] = ACTIONS

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        a = inner(args)
        agent = agent_of(ctx)

        def render(result: dict[str, Any], replayed: bool, doc: Doc) -> ToolOutput:
            document = render_view(doc)
            return mutation_output(
                f"plan {result['action']}", result, replayed, document, **{PLAN_INSTRUCTION_KEY: "Maintain"}
            )

        budget = fits.of_config(ctx)
        return mutate_for_call(
            ctx, args, scope_of(ctx.session_id), KIND, lambda d: apply_update(d, a, agent, budget), render
        )

"""goal_get / goal_update: the session's Goal — objective, completion criteria, status, revision.

A criterion with ``requires_evidence`` is satisfied only by a verification receipt id (``rcp_…``)
that counts as evidence (evidence.py) — checked when it is attached and again when the Goal
completes, since a later write retires it. Completing with an unsatisfied or stale criterion is a
typed refusal (``CriteriaUnsatisfied``) naming each one.

Statuses: active, paused (with a typed reason), completed, abandoned (the last two terminal).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, RootModel

from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.state import docstore, evidence, fits, goal_input
from zuno.tools.state.actions import (
    MUTATION,
    READ,
    ActionTool,
    Text,
    action_union,
    inner,
    mutate_for_call,
    mutation_output,
)
from zuno.tools.state.docstore import Doc, StateRefusal, check_revision, named
from zuno.tools.state.plan import agent_of, scope_of

KIND = "goal"
GoalStatus = Literal["active", "paused", "completed", "abandoned"]
TERMINAL = frozenset({"completed", "abandoned"})
PauseKind = Literal["user_requested", "waiting_input", "blocked", "no_progress"]
# The reasons the model may give itself; no_progress is the host's (progress.py) and waiting_input
# belongs to a required-input request, which binds its own wait.
ModelPauseKind = Literal["user_requested", "blocked"]
# The criteria of one Goal, in all: create takes at most this many, and add_criteria may not grow
# the Goal past it (each add was bounded by itself, so the Goal grew without limit).
GOAL_MAX_CRITERIA = 50
# What goal_get may show later without the model sending new text, counted when a Goal is measured
# against the output limits (zuno.tools.state.fits): each open criterion satisfied with a receipt
# id as long as the longest, and each evidence criterion listed under stale_evidence with a detail
# of up to GOAL_STALE_DETAIL_ALLOWANCE characters; a status as long as the longest.
GOAL_RECEIPT_ALLOWANCE = "rcp_" + "0" * 32
GOAL_STALE_DETAIL_ALLOWANCE = 512
# Evidence is a receipt id, never prose: on any criterion at most as long as the longest receipt id
# (the words belong in ``note``). Before, a criterion without requires_evidence stored whatever it
# was sent, thousands of characters of it, unchecked.
GOAL_EVIDENCE_MAX_CHARS = len(GOAL_RECEIPT_ALLOWANCE)
GOAL_NOTE_MAX_CHARS = 1000


class NewCriterion(ToolArgs):
    text: Text = Field(min_length=1, max_length=1000)
    requires_evidence: bool = False


class PauseReason(ToolArgs):
    kind: PauseKind
    detail: str | None = Field(None, max_length=1000)


class ModelPauseReason(ToolArgs):
    kind: ModelPauseKind
    # Text: a detail of only whitespace says nothing, yet was shown as the reason ("blocked —    ").
    detail: Text | None = Field(None, min_length=1, max_length=1000)


class Create(ToolArgs):
    action: Literal["create"]
    objective: Text = Field(min_length=1, max_length=2000)
    criteria: list[NewCriterion] = Field(min_length=1, max_length=GOAL_MAX_CRITERIA)
    expected_revision: int | None = Field(None, ge=0)


class AddCriteria(ToolArgs):
    action: Literal["add_criteria"]
    expected_revision: int = Field(ge=1)
    criteria: list[NewCriterion] = Field(min_length=1, max_length=GOAL_MAX_CRITERIA)


# The receipt a shell result shows as "[verification rcp_…]": models copy the whole bracket, or the
# id with the whitespace around it. Either is taken as the id itself; anything else stays as sent
# (and is refused by the evidence check, naming it).
_CITED_RECEIPT = re.compile(r"\[?\s*(?:verification\s+)?(rcp_[0-9A-Za-z_]+)\s*\]?")


def _receipt_id(value: str | None) -> str | None:
    if value is None:
        return None
    m = _CITED_RECEIPT.fullmatch(value.strip())
    return m.group(1) if m else value


class Satisfy(ToolArgs):
    """Mark a criterion satisfied: with a receipt id when it requires evidence."""

    action: Literal["satisfy"]
    expected_revision: int = Field(ge=1)
    criterion_id: str
    evidence: Annotated[str | None, AfterValidator(_receipt_id)] = Field(None, description="A receipt id rcp_…")
    note: str | None = Field(None, max_length=GOAL_NOTE_MAX_CHARS)


class Pause(ToolArgs):
    action: Literal["pause"]
    expected_revision: int = Field(ge=1)
    reason: ModelPauseReason


# The user's answer to a Goal waiting for input (zuno goal resume --input): as long as a note.
GOAL_INPUT_MAX_CHARS = 4000


class Resume(ToolArgs):
    """Host only (/goal resume): a paused Goal is resumed by the user, never by the model. A Goal
    paused ``waiting_input`` resumes only with ``answer``, the user's input it waits for (spec:
    only a real answer to that request satisfies it; a resume cannot bypass a pending human wait)."""

    action: Literal["resume"]
    expected_revision: int = Field(ge=1)
    answer: Text | None = Field(None, min_length=1, max_length=GOAL_INPUT_MAX_CHARS)
    # The required-input request (goal_request_input's gi_…) the answer answers; None: the pending one.
    request: str | None = None


class HostPause(ToolArgs):
    action: Literal["pause"]
    expected_revision: int = Field(ge=1)
    reason: PauseReason


class Complete(ToolArgs):
    action: Literal["complete"]
    expected_revision: int = Field(ge=1)


class Abandon(ToolArgs):
    action: Literal["abandon"]
    expected_revision: int = Field(ge=1)
    reason: Text = Field(min_length=1, max_length=1000)


ACTIONS = ["create", "add_criteria", "satisfy", "pause", "complete", "abandon"]


class GoalUpdateArgs(RootModel[action_union(Create, AddCriteria, Satisfy, Pause, Complete, Abandon)]):  # type: ignore[misc]
    pass


def _criteria(body: dict[str, Any], new: list[NewCriterion]) -> list[dict[str, Any]]:
    out = []
    for c in new:
        body["next"] += 1
        out.append(
            {
                "id": f"c{body['next']}",
                "text": c.text,
                "requires_evidence": c.requires_evidence,
                "satisfied": False,
                "evidence": None,
                "note": None,
            }
        )
    return out


def unsatisfied(store: Any, session_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every criterion that does not hold now, with why (evidence re-checked for freshness)."""
    out = []
    for c in body["criteria"]:
        if not c["satisfied"]:
            out.append({"criterion": c["id"], "text": c["text"], "reason": "unsatisfied"})
        elif c["requires_evidence"]:
            v = evidence.check(store, session_id, c["evidence"] or "")
            if not v.ok:
                out.append(
                    {
                        "criterion": c["id"],
                        "text": c["text"],
                        "reason": v.reason,
                        "detail": v.detail,
                        "evidence": c["evidence"],
                    }
                )
    return out


def _at_most_text(doc: Doc) -> str:
    """goal_get's text for ``doc`` as large as later changes without new text could make it."""
    b = json.loads(json.dumps(doc.body))
    stale = []
    for c in b["criteria"]:
        if not c["satisfied"]:
            c["satisfied"] = True
            if c["requires_evidence"]:
                c["evidence"] = GOAL_RECEIPT_ALLOWANCE
        if c["requires_evidence"]:
            stale.append(
                {
                    "criterion": c["id"],
                    "text": c["text"],
                    "reason": "not_authoritative",
                    "detail": "x" * GOAL_STALE_DETAIL_ALLOWANCE,
                    "evidence": c["evidence"] or GOAL_RECEIPT_ALLOWANCE,
                }
            )
    if b["status"] not in TERMINAL:
        b["status"] = "abandoned"
    data = view(Doc(fits.REVISION_ALLOWANCE, b))
    if stale:
        data["stale_evidence"] = stale
    return json.dumps(data, ensure_ascii=False, indent=1)


def _fit(doc: Doc, body: dict[str, Any], budget: tuple[int, int] | None) -> None:
    fits.check(
        "GoalTooLarge",
        "the Goal",
        fits.measure(_at_most_text(Doc(doc.revision + 1, body))),
        fits.measure(_at_most_text(doc)) if doc.body is not None else None,
        budget or fits.budget(),
        "Keep the objective, criteria and notes shorter (the steps toward them belong in the Plan or Todos).",
        " (counting every criterion as satisfied, with evidence where it needs some, as it may yet be)",
    )


def apply_update(
    store: Any, session_id: str, doc: Doc, a: Any, agent: str, budget: tuple[int, int] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``budget``: the output limits a model's change is measured against (None: the host's own
    change, which is never refused for its size)."""
    body, result = _apply_update(store, session_id, doc, a, agent)
    if budget is not None:
        _fit(doc, body, budget)
    return body, result


def _apply_update(store: Any, session_id: str, doc: Doc, a: Any, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    check_revision(doc, a.expected_revision, "Goal", "goal_get", creating=a.action == "create")
    if a.action == "create" and doc.body is not None and doc.body["status"] == "paused":
        # A new Goal over a paused one would resume work the user has not resumed.
        why = str((doc.body.get("pause_reason") or {}).get("kind") or "paused")
        raise StateRefusal(
            "GoalPaused",
            f"the Goal is paused ({why}); a new Goal cannot replace it while it is.",
            "Leave it paused: only the user resumes a paused Goal (/goal resume, zuno goal resume). If its "
            "objective is obsolete, abandon it (action abandon, with a reason) before creating a new one.",
            status="paused",
            pauseReason=why,
        )
    if a.action == "create":
        body: dict[str, Any] = {"next": 0}
        body.update(objective=a.objective, status="active", pause_reason=None, owner=agent, criteria=[])
        body["criteria"] = _criteria(body, a.criteria)
        if doc.body is not None:
            body["next"] = max(body["next"], doc.body["next"])
        return body, {"action": "create"}
    body = json.loads(json.dumps(doc.body))
    status = body["status"]
    if status in TERMINAL:
        raise StateRefusal(
            "TerminalGoal",
            f"the Goal is {status} (terminal).",
            "Create a new Goal (action create, with expected_revision) for new work.",
            status=status,
        )
    if a.action == "add_criteria":
        total = len(body["criteria"]) + len(a.criteria)
        if total > GOAL_MAX_CRITERIA:
            raise StateRefusal(
                "TooManyCriteria",
                f"the Goal would have {total} criteria; a Goal has at most {GOAL_MAX_CRITERIA}.",
                "Merge criteria into fewer, broader ones; the steps toward them belong in the Plan or Todos.",
                criteria=total,
                limit=GOAL_MAX_CRITERIA,
            )
        body["criteria"].extend(_criteria(body, a.criteria))
    elif a.action == "satisfy":
        c = next((c for c in body["criteria"] if c["id"] == a.criterion_id), None)
        if c is None:
            raise StateRefusal(
                "UnknownCriterion",
                f"there is no criterion {named(a.criterion_id)}.",
                "Use a criterion id goal_get returned.",
                criterion=named(a.criterion_id),
            )
        if a.evidence is not None and not c["requires_evidence"] and len(a.evidence) > GOAL_EVIDENCE_MAX_CHARS:
            raise StateRefusal(
                "EvidenceTooLong",
                f"evidence {named(a.evidence)} is not a receipt id: evidence holds at most "
                f"{GOAL_EVIDENCE_MAX_CHARS} characters (GOAL_EVIDENCE_MAX_CHARS), a verification receipt id rcp_….",
                f"Send a receipt id rcp_… as evidence, or none; say in words why it holds in note (at most "
                f"{GOAL_NOTE_MAX_CHARS} characters).",
                criterion=c["id"],
                limit=GOAL_EVIDENCE_MAX_CHARS,
            )
        if c["requires_evidence"]:
            if not a.evidence:
                v = evidence.Verdict(False, "no_evidence", "this criterion requires a verification receipt id")
            elif len(a.evidence) > len(GOAL_RECEIPT_ALLOWANCE):  # longer than any receipt id: named, cut
                v = evidence.Verdict(False, "unknown_receipt", f"no verification receipt {named(a.evidence)} is stored")
            else:
                v = evidence.check(store, session_id, a.evidence)
            if not v.ok:
                raise StateRefusal(
                    "EvidenceRejected",
                    f"criterion {c['id']} needs evidence: {v.detail}.",
                    "Run the verification with shell after your last change and send the rcp_… id of the "
                    "[verification rcp_…] line it returns as evidence.",
                    criterion=c["id"],
                    reason=v.reason,
                    evidence=named(a.evidence or ""),
                )
        # Satisfied again (a confused model re-confirming): what this call omits keeps its value; before,
        # a satisfy without note erased the note (and evidence) an earlier satisfy recorded.
        c.update(
            satisfied=True,
            evidence=a.evidence if a.evidence is not None else c["evidence"],
            note=a.note if a.note is not None else c["note"],
        )
    elif a.action == "pause":
        if status != "active":
            raise StateRefusal(
                "InvalidTransition",
                f"the Goal is {status}; only an active Goal pauses.",
                "Leave it paused: the user resumes a paused Goal (/goal resume).",
                status=status,
            )
        body.update(status="paused", pause_reason=a.reason.model_dump(mode="json"))
    elif a.action == "resume":
        if status != "paused":
            raise StateRefusal(
                "InvalidTransition", f"the Goal is {status}, not paused.", "Nothing to resume.", status=status
            )
        pause = body.get("pause_reason") or {}
        waiting = pause.get("kind") == "waiting_input"
        if waiting and a.answer is None:
            raise waiting_for_input(pause.get("detail"))
        if not waiting and a.answer is not None:
            raise StateRefusal(
                "NotWaitingInput",
                f"the Goal is paused ({pause.get('kind') or 'paused'}), not waiting for input: an answer answers "
                "nothing.",
                "Resume it without an answer (zuno goal resume, /goal resume); say anything more as the next prompt.",
                status=status,
                pauseReason=pause.get("kind"),
            )
        pending = pause.get("request") if waiting else None
        if a.request is not None and a.request != pending:
            raise wrong_request(a.request, pending)
        body.update(status="active", pause_reason=None)
        if waiting:
            body["input_answer"] = {"asked": pause.get("detail"), "answer": a.answer}
            if pending:  # the answer to exactly this request (goal_input.settle_wait closes its wait)
                body["input_answer"]["request"] = pending
    elif a.action == "complete":
        if status != "active":
            raise StateRefusal(
                "InvalidTransition",
                f"the Goal is {status}; resume it before completing it.",
                "The user resumes a paused Goal first (/goal resume).",
                status=status,
            )
        missing = unsatisfied(store, session_id, body)
        if missing:
            names = "; ".join(
                f"{m['criterion']} ({m['reason']}" + (f": {m['detail']}" if m.get("detail") else "") + ")"
                for m in missing
            )
            raise StateRefusal(
                "CriteriaUnsatisfied",
                f"the Goal cannot complete: {names}.",
                "Satisfy each named criterion (evidence criteria with a fresh passed receipt recorded after the "
                "last write), then complete again.",
                criteria=missing,
            )
        body["status"] = "completed"
    else:
        # A paused Goal abandoned is no longer paused: its pause reason goes with the pause.
        body.update(status="abandoned", abandon_reason=a.reason, pause_reason=None)
    return body, {"action": a.action}


def waiting_for_input(detail: str | None) -> StateRefusal:
    """A resume of a Goal that waits for the user's input, without that input."""
    asked = f" ({detail})" if detail else ""
    return StateRefusal(
        "WaitingInput",
        f"the Goal is waiting for your input{asked}; resuming it does not answer that, and only an answer does.",
        "Give the answer: zuno goal resume --input 'your answer' (in zuno run: /goal resume your answer). "
        "That resumes the Goal with it.",
        status="paused",
        pauseReason="waiting_input",
    )


def wrong_request(named_id: str, pending: str | None) -> StateRefusal:
    """An answer naming a required-input request the Goal does not wait for."""
    now = f"it waits for request {pending}" if pending else "it waits for no required-input request"
    return StateRefusal(
        "WrongRequest",
        f"the answer names request {named(named_id)}, but {now}: an answer answers exactly the request it names.",
        "Answer the pending request (zuno goal shows it): zuno goal resume --input 'your answer'"
        + (f" --request {pending}" if pending else "")
        + ".",
        request=named(named_id),
        pendingRequest=pending,
    )


def view(doc: Doc) -> dict[str, Any]:
    if doc.body is None:
        return {"goal": None, "revision": 0}
    b = doc.body
    goal = {k: b[k] for k in ("objective", "status", "owner") if k in b}
    if b.get("pause_reason"):
        goal["pause_reason"] = b["pause_reason"]
    if b.get("abandon_reason"):
        goal["abandon_reason"] = b["abandon_reason"]
    if b.get("input_answer"):  # the user's answer to the input it waited for (zuno goal resume --input)
        goal["input_answer"] = b["input_answer"]
    goal["criteria"] = [{k: v for k, v in c.items() if v is not None} for c in b["criteria"]]
    return {"revision": doc.revision, "goal": goal}


def fingerprint(doc: Doc) -> str:
    return docstore.digest({"kind": KIND, "revision": doc.revision, "body": doc.body})


class GoalGetTool(ActionTool):
    name = "goal_get"
    description = (
"The Goal (objective, criteria, status and why, input_answer) and its revision; goal null when none."
    )
    Args = ToolArgs
    declarations = READ  # goal status: ReadOnly, Safe, ParallelSafe

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        doc = docstore.read(ctx.store, scope_of(ctx.session_id), KIND)
        data = view(doc)
        if doc.body is not None and doc.body["status"] not in TERMINAL:
            stale = [m for m in unsatisfied(ctx.store, ctx.session_id, doc.body) if m["reason"] != "unsatisfied"]
            if stale:
                data["stale_evidence"] = stale
        return ToolOutput(
            text=json.dumps(data, ensure_ascii=False, indent=1),
            metadata={"revision": doc.revision, "progressFingerprint": fingerprint(doc)},
        )


class GoalUpdateTool(ActionTool):
    name = "goal_update"
    description = (
        "Change the Goal. A requires_evidence criterion needs a receipt rcp_… that passed after the last write; "
        "complete is refused while a criterion is unsatisfied or stale. Only the user resumes a paused Goal. "
        "expected_revision: goal_get's."
    )
    Args = GoalUpdateArgs
    declarations = MUTATION
    ACTIONS: ClassVar[list[str]] = ACTIONS

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        a = inner(args)
        agent = agent_of(ctx)

        def render(result: dict[str, Any], replayed: bool, doc: Doc) -> ToolOutput:
            document = json.dumps(view(doc), ensure_ascii=False, indent=1)
            return mutation_output(f"goal {result['action']}", result, replayed, document)

        budget = fits.of_config(ctx)

        def apply(d: Doc) -> tuple[dict[str, Any], dict[str, Any]]:
            return apply_update(ctx.store, ctx.session_id, d, a, agent, budget)

        also = goal_input.settle_wait(ctx.session_id)
        return mutate_for_call(ctx, args, scope_of(ctx.session_id), KIND, apply, render, also)


def host_update(store: Any, session_id: str, args: Resume | HostPause, delivery_id: str) -> dict[str, Any]:
    """A Goal change made by the host, not the model (/goal resume, a no_progress pause): the same
    revision rules and delivery idempotency. Raises StateRefusal."""
    doc = docstore.read(store, scope_of(session_id), KIND)
    owner = str((doc.body or {}).get("owner") or "main")
    result, _ = docstore.mutate(
        store,
        scope_of(session_id),
        KIND,
        docstore.Delivery(delivery_id, ["host", args.model_dump(mode="json")]),
        lambda d: apply_update(store, session_id, d, args, owner),
        goal_input.settle_wait(session_id),
    )
    return result


def resume_goal(
    store: Any,
    session_id: str,
    expected_revision: int,
    delivery_id: str,
    answer: str | None = None,
    request: str | None = None,
) -> dict[str, Any]:
    """/goal resume: the user's explicit resumption of a paused Goal at the revision they saw; ``answer``
    the input a ``waiting_input`` Goal waits for (required then, refused otherwise); ``request`` the
    required-input request it answers (refused unless it is the pending one)."""
    resume = Resume(action="resume", expected_revision=expected_revision, answer=answer, request=request)
    return host_update(store, session_id, resume, delivery_id)

"""task_context: one meaningful long task's objective, authorized interpretation, prohibitions,
user sources, decision owner and delivery/safety checks (ManagedContext).

get reads; update patches the current revision; replace explicitly starts a new task. The rules
(docs/state.md, "task_context"):

* a new context (replace, or the first update) requires objective, task_kind (delivery|inspection)
  and source_message_ids; the generic intent field is a UI label only and never the task kind;
* omitted update fields keep their values; ``authorized`` and ``prohibitions`` merge (a new
  prohibition never erases an authorized action); checks merge by id;
* a check's definition (kind, text) stays fixed unless ``revise_checks: true``, which needs
  user sources in the same call and resets each changed check to pending with no old evidence;
* a delivery task completes only with passed delivery checks carrying evidence references —
  passed safety checks alone do not complete it;
* sources are user messages only (sources.py): each is stored with the digest of all its
  user-input parts; a source whose digest no longer matches (or that is gone) is reported stale.

It is not a permission grant: permission rules still apply to every call.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, RootModel

from zuno.declarations import Declarations
from zuno.store import Store
from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.shell.receipts import get_receipt
from zuno.tools.state import docstore, sources
from zuno.tools.state.actions import MUTATION, READ, ActionTool, action_union, inner, mutate_for_call, mutation_head
from zuno.tools.state.docstore import Doc, StateRefusal, check_revision
from zuno.tools.state.plan import scope_of

KIND = "task_context"
MAX_ITEMS = 50
CheckKind = Literal["delivery", "safety"]
CheckStatus = Literal["pending", "passed", "failed"]


class CheckIn(ToolArgs):
    id: str | None = Field(None, description="An existing check's id to change; omit to add a check.")
    kind: CheckKind | None = None
    text: str | None = Field(None, min_length=1, max_length=1000)
    status: CheckStatus | None = None
    evidence: list[str] | None = Field(None, description="Evidence references: rcp_ receipt ids, call ids, paths.")


class Get(ToolArgs):
    action: Literal["get"]


class _Fields(ToolArgs):
    objective: str | None = Field(None, min_length=1, max_length=4000)
    task_kind: Literal["delivery", "inspection"] | None = None
    authorized: list[str] | None = Field(None, max_length=MAX_ITEMS, description="Actions the user authorized.")
    prohibitions: list[str] | None = Field(None, max_length=MAX_ITEMS)
    decision_owner: str | None = Field(None, max_length=200)
    source_message_ids: list[str] | None = Field(None, max_length=MAX_ITEMS)
    checks: list[CheckIn] | None = Field(None, max_length=MAX_ITEMS)


class Update(_Fields):
    """Patch the current context (or start one: then objective, task_kind, source_message_ids)."""

    action: Literal["update"]
    expected_revision: int | None = Field(None, ge=0, description="Required once a context exists.")
    revise_checks: bool = False
    status: Literal["active", "completed"] | None = None


class Replace(_Fields):
    """Explicitly start a new task context."""

    action: Literal["replace"]
    objective: str = Field(min_length=1, max_length=4000)
    task_kind: Literal["delivery", "inspection"]
    source_message_ids: list[str] = Field(min_length=1, max_length=MAX_ITEMS)
    expected_revision: int | None = Field(None, ge=0, description="Required when a context exists.")


ACTIONS = ["get", "update", "replace"]


class TaskContextArgs(RootModel[action_union(Get, Update, Replace)]):  # type: ignore[misc]
    pass


def _sources(store: Store, session_id: str, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for mid in ids:
        msg = sources.lookup_message(store, session_id, mid)
        if msg is None:
            raise StateRefusal(
                "InvalidSource",
                f"there is no message {mid} in this session.",
                "Cite the id of a user message of this session.",
                source=mid,
                reason="unknown",
            )
        if not msg.can_authorize:
            what = msg.origin if msg.origin != "user" else f"a {msg.role} message"
            raise StateRefusal(
                "InvalidSource",
                f"message {mid} is {what.replace('_', ' ')}; only a user's own message can be an authorization source.",
                "Cite the user message that said it.",
                source=mid,
                reason=msg.origin if msg.origin != "user" else msg.role,
            )
        out.append({"id": mid, "digest": sources.source_digest(msg)})
    return out


def _merge_list(old: list[str], new: list[str] | None) -> list[str]:
    out = list(old)
    for x in new or []:
        if x not in out:
            out.append(x)
    return out


def _evidence(store: Store, session_id: str, refs: list[str]) -> list[str]:
    for ref in refs:
        if ref.startswith("rcp_"):
            r = get_receipt(store, ref)
            if r is None or r.get("session") != session_id:
                raise StateRefusal(
                    "InvalidEvidence",
                    f"{ref} is not a verification receipt of this session.",
                    "Cite a receipt id a shell call of this session returned.",
                    evidence=ref,
                )
    return refs


def _apply_checks(store: Store, sid: str, body: dict[str, Any], checks: list[CheckIn], revise: bool) -> None:
    by_id = {c["id"]: c for c in body["checks"]}
    for c in checks:
        if c.id is None:
            if c.kind is None or c.text is None:
                raise StateRefusal(
                    "IncompleteCheck",
                    "a new check needs kind (delivery|safety) and text.",
                    "Give both, or name an existing check's id.",
                )
            body["next_check"] += 1
            check = {
                "id": f"k{body['next_check']}",
                "kind": c.kind,
                "text": c.text,
                "status": "pending",
                "evidence": [],
            }
            body["checks"].append(check)
            by_id[check["id"]] = check
        else:
            check = by_id.get(c.id)
            if check is None:
                raise StateRefusal(
                    "UnknownCheck",
                    f"there is no check {c.id}.",
                    "Use a check id task_context get returned.",
                    check=c.id,
                )
            redefined = (c.kind is not None and c.kind != check["kind"]) or (
                c.text is not None and c.text != check["text"]
            )
            if redefined:
                if not revise:
                    raise StateRefusal(
                        "CheckDefinitionFixed",
                        f"check {c.id}'s definition is fixed during ordinary updates.",
                        "Change only its status and evidence, or send revise_checks: true with the user's "
                        "source_message_ids that asked for the change.",
                        check=c.id,
                    )
                check.update(kind=c.kind or check["kind"], text=c.text or check["text"], status="pending", evidence=[])
                continue  # reset: no status or evidence carried over from this call or before
        if c.status is not None:
            check["status"] = c.status
        if c.evidence:
            check["evidence"] = _merge_list(check["evidence"], _evidence(store, sid, c.evidence))
        if check["status"] == "passed" and check["kind"] == "delivery" and not check["evidence"]:
            raise StateRefusal(
                "EvidenceRequired",
                f"delivery check {check['id']} cannot pass without evidence references.",
                "Attach the evidence (a verification receipt rcp_…, a call id) that shows it passed.",
                check=check["id"],
            )


def _completion_blockers(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {"check": c["id"], "kind": c["kind"], "status": c["status"]} for c in body["checks"] if c["status"] != "passed"
    ]
    if body["task_kind"] == "delivery":
        delivery_checks = [c for c in body["checks"] if c["kind"] == "delivery"]
        if not delivery_checks:
            out.append({"check": None, "kind": "delivery", "status": "missing"})
        for c in delivery_checks:
            if c["status"] == "passed" and not c["evidence"]:
                out.append({"check": c["id"], "kind": "delivery", "status": "no_evidence"})
    return out


def apply_update(store: Store, sid: str, doc: Doc, a: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    new = a.action == "replace" or doc.body is None
    check_revision(doc, a.expected_revision, "task context", "task_context get", creating=new)
    if new:
        missing = [f for f in ("objective", "task_kind", "source_message_ids") if not getattr(a, f)]
        if missing:
            raise StateRefusal(
                "NewContextIncomplete",
                "a new task context requires " + ", ".join(missing) + ".",
                "Send objective, task_kind (delivery or inspection; intent is only a UI label) and the user's "
                "source_message_ids.",
                missing=missing,
            )
        body: dict[str, Any] = {
            "objective": a.objective,
            "task_kind": a.task_kind,
            "authorized": [],
            "prohibitions": [],
            "decision_owner": None,
            "sources": [],
            "checks": [],
            "next_check": 0,
            "status": "active",
            "started_revision": doc.revision + 1,
        }
    else:
        body = json.loads(json.dumps(doc.body))
        if body["status"] == "completed":
            raise StateRefusal(
                "TerminalContext",
                "the task context is completed.",
                "Start a new task with action replace.",
                status="completed",
            )
        if a.objective is not None:
            body["objective"] = a.objective
        if a.task_kind is not None:
            body["task_kind"] = a.task_kind
    revise = getattr(a, "revise_checks", False)
    if revise and not a.source_message_ids:
        raise StateRefusal(
            "RevisionNeedsSource",
            "revise_checks: true requires the user's source_message_ids in the same call.",
            "Cite the user message that asked for the changed check.",
        )
    fresh = _sources(store, sid, a.source_message_ids or [])
    known = {s["id"] for s in body["sources"]}
    body["sources"].extend(s for s in fresh if s["id"] not in known)
    body["authorized"] = _merge_list(body["authorized"], a.authorized)
    body["prohibitions"] = _merge_list(body["prohibitions"], a.prohibitions)
    if a.decision_owner is not None:
        body["decision_owner"] = a.decision_owner
    if a.checks:
        _apply_checks(store, sid, body, a.checks, revise)
    for key in ("authorized", "prohibitions", "sources", "checks"):
        if len(body[key]) > MAX_ITEMS:
            raise StateRefusal(
                "ContextTooLarge",
                f"the task context would hold {len(body[key])} {key}; at most {MAX_ITEMS}.",
                "Keep the context to what the task needs, or start a new task with replace.",
                field=key,
                limit=MAX_ITEMS,
            )
    if getattr(a, "status", None) == "completed":
        blockers = _completion_blockers(body)
        if blockers:
            raise StateRefusal(
                "ChecksUnsatisfied",
                "the task cannot complete: "
                + "; ".join(f"{b['check'] or 'a delivery check'} {b['status']}" for b in blockers)
                + (" (passed safety checks do not complete a delivery task)" if body["task_kind"] == "delivery" else "")
                + ".",
                "Pass every check; a delivery task needs passed delivery checks with evidence references.",
                checks=blockers,
            )
        body["status"] = "completed"
    return body, {"action": a.action}


def view(store: Store, session_id: str, doc: Doc) -> dict[str, Any]:
    if doc.body is None:
        return {"task_context": None, "revision": 0}
    b = json.loads(json.dumps(doc.body))
    for s in b["sources"]:
        msg = sources.lookup_message(store, session_id, s["id"])
        s["state"] = "current" if msg is not None and sources.source_digest(msg) == s["digest"] else "stale"
    b.pop("next_check", None)
    b.pop("started_revision", None)
    out: dict[str, Any] = {"revision": doc.revision, "task_context": b}
    if any(s["state"] == "stale" for s in b["sources"]):
        out["note"] = "A source changed since it was cited: it is historical. Current user instructions win."
    return out


class TaskContextTool(ActionTool):
    name = "task_context"
    description = (
        "Keep one meaningful long task's context: objective, task_kind (delivery|inspection), authorized "
        "actions, prohibitions, user source message ids, decision owner, delivery/safety checks. action get "
        "reads; update patches (omitted fields keep their values; authorized, prohibitions and checks merge); "
        "replace starts a new task (objective, task_kind, source_message_ids required). Check definitions "
        "change only with revise_checks: true and user sources. Not a permission grant. Skip it for "
        "self-contained questions and one-step work."
    )
    Args = TaskContextArgs
    declarations = MUTATION  # mixed: get is a read; an absent or unknown action fails closed
    action_declarations: ClassVar[dict[str, Declarations]] = {"get": READ, "update": MUTATION, "replace": MUTATION}
    ACTIONS: ClassVar[list[str]] = ACTIONS

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        a = inner(args)
        scope = scope_of(ctx.session_id)
        if a.action == "get":
            doc = docstore.read(ctx.store, scope, KIND)
            return ToolOutput(
                text=json.dumps(view(ctx.store, ctx.session_id, doc), ensure_ascii=False, indent=1),
                metadata={"revision": doc.revision},
            )

        def render(result: dict[str, Any], replayed: bool, doc: Doc) -> ToolOutput:
            head = mutation_head(f"task_context {a.action}", result, replayed)
            return ToolOutput(
                text=head + "\n" + json.dumps(view(ctx.store, ctx.session_id, doc), ensure_ascii=False, indent=1),
                metadata={"revision": result["revision"], "replayed": replayed, "invalidatesContext": True},
            )

        return mutate_for_call(
            ctx, args, scope, KIND, lambda d: apply_update(ctx.store, ctx.session_id, d, a), render
        )

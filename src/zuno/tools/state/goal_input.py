"""goal_request_input: the Goal-owned required-input request (the spec's "Durable questions and
waiting": required input is an explicit control, separate from optional clarification).

The model sends the Goal revision it observed and its question. In ONE store transaction the
revision is checked (``StaleRevision`` otherwise), the Goal must be active, the Goal is paused
``waiting_input`` bound to a new request id ``gi_…`` and the session's wait is recorded: a row of
``goal_input_requests`` (id, session, the observed Goal revision, the question, options, status
``pending``). The same delivery (call id) replayed returns the same request; no second one.

Only a real answer to that exact request satisfies it: ``zuno goal resume --input ANSWER
[--request ID]`` (or ``/goal resume ANSWER``) marks the row ``answered`` with the answer, records it
once in the Goal (``input_answer`` with the request id) and resumes the Goal, again in one
transaction. A plain resume, the model's own goal_update, automatic continuation and any other
callback cannot; an answered request is not answered again. Abandoning the Goal while it waits
closes the wait as ``cancelled`` (no answer).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from zuno import family_migrations
from zuno.store import Store
from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.state import docstore
from zuno.tools.state.actions import MUTATION, ActionTool, Text, delivery
from zuno.tools.state.docstore import Also, Doc, StateRefusal, check_revision, named

MIGRATIONS = family_migrations.STATE_GOAL_INPUT  # (the SQL: zuno.family_migrations)

KIND = "goal"  # the document the request pauses (goal.KIND; not imported: goal imports this module)
# What the model may ask in one request: a question as long as a criterion.
GOAL_QUESTION_MAX_CHARS = 1000
REQUEST_PREFIX = "gi_"


def _short_question(value: str) -> str:
    if len(value) > GOAL_QUESTION_MAX_CHARS:
        raise ValueError(
            f"is {len(value):,} characters; a question holds at most {GOAL_QUESTION_MAX_CHARS:,}"
            " (GOAL_QUESTION_MAX_CHARS): ask for one thing, briefly"
        )
    return value


class RequestInputArgs(ToolArgs):
    expected_revision: int = Field(ge=1)
    # Bounded, checked not declared, and the choices (if any) are written in the question: the wire
    # schema's bytes are what the built-in surface has least of (schema_export.BUILTIN_SURFACE_BUDGET_BYTES).
    question: Annotated[Text, AfterValidator(_short_question)] = Field(min_length=1)


def waiting_request(body: Any) -> str | None:
    """The id of the required-input request a Goal body is paused for, or None."""
    if not body or body.get("status") != "paused":
        return None
    pause = body.get("pause_reason") or {}
    return str(pause["request"]) if pause.get("kind") == "waiting_input" and pause.get("request") else None


def apply_request(
    doc: Doc, a: RequestInputArgs, request_id: str, agent: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Goal paused for ``request_id``, or a refusal (nothing written). Goal-owned: only the agent
    that owns the Goal asks (a delegated agent reports its blocker to its parent instead)."""
    check_revision(doc, a.expected_revision, "Goal", "goal_get")
    body = json.loads(json.dumps(doc.body))
    status = body["status"]
    owner = body.get("owner")
    if owner and owner != agent:
        raise StateRefusal(
            "NotGoalOwner",
            f"the Goal is owned by {named(str(owner))}, not {named(agent)}: only its owner asks the user for "
            "required input.",
            "Report what blocks you to the agent that owns the Goal (your parent) in your answer.",
            owner=named(str(owner)),
        )
    if status != "active":
        pause = body.get("pause_reason") or {}
        pending = waiting_request(body)
        why = f" ({pause.get('kind')}" + (f": request {pending} is pending" if pending else "") + ")" if pause else ""
        raise StateRefusal(
            "GoalNotActive",
            f"the Goal is {status}{why}; only an active Goal asks for required input.",
            "Stop and wait: the user answers a pending request (their answer appears in goal_get as input_answer)."
            if pending
            else "Ask in your answer instead; a paused Goal is resumed by the user, a terminal one is done.",
            status=status,
            **({"pendingRequest": pending} if pending else {}),
        )
    body.update(status="paused", pause_reason={"kind": "waiting_input", "detail": a.question, "request": request_id})
    return body, {"action": "request_input", "request": request_id}


def record_wait(session_id: str, a: RequestInputArgs, request_id: str, call_id: str) -> Also:
    """The session wait, written in the pause's own transaction."""

    def also(db: sqlite3.Connection, before: Doc, _after: Any, revision: int) -> None:
        db.execute(
            "INSERT INTO goal_input_requests (id, session_id, goal_revision, paused_revision, question, options,"
            " status, call_id, asked_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (
                request_id,
                session_id,
                before.revision,
                revision,
                a.question,
                None,  # options: a column for a client that offers choices; the tool sends none
                call_id,
                time.time(),
            ),
        )

    return also


def settle_wait(session_id: str) -> Also:
    """For every other Goal change: a change that ends the pause of a pending request closes its
    wait in the same transaction — ``answered`` when the Goal now holds the answer to exactly that
    request (a resume with it), else ``cancelled`` (the Goal abandoned). A request that is no longer
    pending is never closed again: the change is refused, nothing written."""

    def also(db: sqlite3.Connection, before: Doc, after: Any, revision: int) -> None:
        was = waiting_request(before.body)
        if was is None or waiting_request(after) == was:
            return
        answer = (after or {}).get("input_answer") or {}
        answered = after.get("status") == "active" and answer.get("request") == was
        status = "answered" if answered else "cancelled"
        cur = db.execute(
            "UPDATE goal_input_requests SET status = ?, answer = ?, closed_at = ?, closed_revision = ?"
            " WHERE id = ? AND session_id = ? AND status = 'pending'",
            (status, answer.get("answer") if answered else None, time.time(), revision, was, session_id),
        )
        if cur.rowcount == 0:
            raise StateRefusal(
                "RequestNotPending",
                f"required-input request {was} is no longer pending.",
                "Look at the Goal again (zuno goal); an answered request is not answered twice.",
                request=was,
            )

    return also


def request_row(store: Any, session_id: str, request_id: str) -> dict[str, Any] | None:
    rows = store.query(
        "SELECT * FROM goal_input_requests WHERE session_id = ? AND id = ?", (session_id, request_id)
    )
    return _row(rows[0]) if rows else None


def pending_request(store: Any, session_id: str) -> dict[str, Any] | None:
    """The session's pending required-input request (at most one: only an active Goal asks)."""
    rows = store.query(
        "SELECT * FROM goal_input_requests WHERE session_id = ? AND status = 'pending' ORDER BY asked_at DESC LIMIT 1",
        (session_id,),
    )
    return _row(rows[0]) if rows else None


def _row(r: Any) -> dict[str, Any]:
    out = {
        "id": r["id"],
        "status": r["status"],
        "question": r["question"],
        "goal_revision": int(r["goal_revision"]),
        "asked_at": float(r["asked_at"]),
    }
    if r["options"] is not None:
        out["options"] = json.loads(r["options"])
    if r["status"] != "pending":
        out.update(closed_at=r["closed_at"], answer=r["answer"])
    return out


WAIT_TEXT = (
    "Required input requested: {rid}. The Goal is paused (waiting_input) until the user answers exactly this "
    "request; the turn ends now. Do not continue or ask again: the answer will be in goal_get (input_answer)."
)


class GoalRequestInputTool(ActionTool):
    name = "goal_request_input"
    description = (
        "Ask the user for input the Goal cannot go on without: pauses it and ends the turn until they answer. "
        "expected_revision: goal_get's."
    )
    Args = RequestInputArgs
    declarations = MUTATION

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        from zuno.tools.state.plan import agent_of, scope_of

        a: RequestInputArgs = args
        rid = REQUEST_PREFIX + uuid.uuid4().hex[:20]
        try:
            result, replayed = docstore.mutate(
                ctx.store,
                scope_of(ctx.session_id),
                KIND,
                delivery(ctx, a),
                lambda d: apply_request(d, a, rid, agent_of(ctx)),
                record_wait(ctx.session_id, a, rid, ctx.call_id),
            )
        except StateRefusal as r:
            return r.to_output()
        rid = str(result["request"])
        head = f"[goal request_input: revision {result['revision']}" + (
            " · repeated delivery, applied once]" if replayed else "]"
        )
        return ToolOutput(
            text=head + "\n" + WAIT_TEXT.format(rid=rid),
            metadata={
                "revision": result["revision"],
                "result": result,
                "replayed": replayed,
                "invalidatesContext": True,
                "waitingInput": rid,
            },
        )


def pending_for(store: Store, session_id: str) -> dict[str, Any] | None:
    """``pending_request`` that a store from before this table answers with None."""
    try:
        return pending_request(store, session_id)
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None
        raise

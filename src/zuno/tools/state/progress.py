"""An active Goal's persisted progress fingerprint: three identical observations pause it with
``no_progress`` — the one implementation of the rule.

Zuno's agent loop calls :func:`observe_goal` (through ``registry.goal_observers``) once per
reconciliation in Goal mode, after a provider final, with the id of the request whose final it
observes; a host without that loop calls it the same way, with its own unique id per cycle. The
observation is a digest of what progress would change: the Goal, Plan and Todo documents (their
revisions and bodies), the session's latest recorded write (``writtenPaths``) and its latest
verification receipt. It is persisted (kind ``goal_progress``), so a restart does not reset the
count, and a repeated id is not counted twice. A changed observation resets the count to 1; the
third identical consecutive one pauses an active Goal with reason ``no_progress`` (a revisioned
mutation, like any other, under the host's own delivery id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from zuno import limits
from zuno.store import Store
from zuno.tools.state import docstore, goal, plan, todo

KIND = "goal_progress"


@dataclass(frozen=True, slots=True)
class Observation:
    fingerprint: str
    count: int  # consecutive identical observations, this one included
    paused: bool  # this observation paused the Goal with no_progress


def fingerprint(store: Store, session_id: str) -> str:
    scope = plan.scope_of(session_id)
    docs = {k: docstore.read(store, scope, k) for k in (goal.KIND, plan.KIND, todo.KIND)}
    last_write = 0
    for r in store.query(
        "SELECT seq, metadata FROM calls WHERE session_id = ? AND metadata LIKE '%writtenPaths%' ORDER BY seq DESC",
        (session_id,),
    ):
        if json.loads(r["metadata"] or "{}").get("writtenPaths"):
            last_write = int(r["seq"])
            break
    receipt = store.query(
        "SELECT id FROM shell_receipts WHERE session_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1", (session_id,)
    )
    return docstore.digest(
        {
            "docs": {k: [d.revision, d.body] for k, d in docs.items()},
            "lastWrite": last_write,
            "lastReceipt": receipt[0]["id"] if receipt else None,
        }
    )


def observe_goal(store: Store, session_id: str, observation_id: str) -> Observation | None:
    """Record one observation (``observation_id``: the host's unique id for it, e.g. the cycle id;
    a repeated id is not counted twice). None when there is no active Goal."""
    scope = plan.scope_of(session_id)
    g = docstore.read(store, scope, goal.KIND)
    if g.body is None or g.body["status"] != "active":
        return None
    fp = fingerprint(store, session_id)

    def apply(doc: docstore.Doc) -> tuple[dict[str, object], dict[str, object]]:
        prev = doc.body or {}
        count = int(prev.get("count", 0)) + 1 if prev.get("fingerprint") == fp else 1
        return {"fingerprint": fp, "count": count}, {"count": count}

    result, _ = docstore.mutate(store, scope, KIND, docstore.Delivery(observation_id, fp), apply)
    count = int(result["count"])
    if count < limits.GOAL_NO_PROGRESS_OBSERVATIONS:
        return Observation(fp, count, False)
    pause = goal.HostPause(
        action="pause",
        expected_revision=g.revision,
        reason=goal.PauseReason(kind="no_progress", detail=f"{count} identical progress observations"),
    )
    try:
        goal.host_update(store, session_id, pause, f"host-no-progress-{observation_id}")
    except docstore.StateRefusal:
        return Observation(fp, count, False)  # the Goal changed meanwhile: that is progress
    return Observation(fp, count, True)

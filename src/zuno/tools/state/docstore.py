"""One revisioned JSON document per (scope, kind): the compare-and-swap every state tool shares.

A mutation names the revision it was based on. It is applied inside one ``BEGIN IMMEDIATE``
transaction that reads the current revision, compares, writes ``revision + 1`` and records the
delivery (trusted call id, request digest, base revision, the result) — so two writers with the
same ``expected_revision``, in one process or in two, serialize on the database lock: exactly one
wins, the other reads the new revision and gets a typed ``StaleRevision`` naming it.

A repeated delivery (the same call id, the same request digest, the same base revision) returns
the stored result and applies nothing; the same call id with a different body is refused.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zuno import family_migrations
from zuno.store import Store
from zuno.tool import ToolOutput

MIGRATIONS = family_migrations.STATE_DOCUMENTS  # (the SQL: zuno.family_migrations)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


# How much of a value the model sent a refusal names: an id no document holds is cut (and its length
# said), so that a refusal of a huge one is still short enough to be seen inline.
NAMED_MAX_CHARS = 80


def named(value: str) -> str:
    """``value`` as a refusal names it: whole when short, else its start and its length."""
    if len(value) <= NAMED_MAX_CHARS:
        return value
    return f"{value[:NAMED_MAX_CHARS]}… ({len(value):,} characters)"


def named_all(values: list[str], most: int = 10) -> str:
    """Several values, each ``named``, at most ``most`` of them (the rest counted)."""
    shown = ", ".join(named(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


class StateRefusal(Exception):
    """A typed, model-correctable refusal: nothing was changed."""

    def __init__(self, kind: str, message: str, required_action: str, **facts: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.required_action = required_action
        self.facts = facts

    def to_metadata(self) -> dict[str, Any]:
        return {"kind": self.kind, "requiredAction": self.required_action, **self.facts}

    def to_output(self) -> ToolOutput:
        text = f"[refused: {self.kind}] {self.message} Nothing was changed. Required action: {self.required_action}"
        return ToolOutput.failure(text, refusal=self.to_metadata())


def stale(resource: str, expected: int | None, current: int, getter: str) -> StateRefusal:
    if expected is None:
        msg = f"the {resource} exists at revision {current} and this call carries no expected_revision"
    else:
        msg = f"expected_revision {expected} is stale: the {resource} is at revision {current}"
    return StateRefusal(
        "StaleRevision",
        msg + ".",
        f"Call {getter}, then rebuild the change from what it returns and send expected_revision {current}.",
        resource=resource,
        expectedRevision=expected,
        currentRevision=current,
    )


@dataclass(frozen=True, slots=True)
class Doc:
    revision: int  # 0: there is no document yet
    body: Any  # None when revision is 0


def read(store: Store, scope: str, kind: str) -> Doc:
    rows = store.query("SELECT revision, body FROM work_state WHERE scope = ? AND kind = ?", (scope, kind))
    if not rows:
        return Doc(0, None)
    return Doc(int(rows[0]["revision"]), json.loads(rows[0]["body"]))


@dataclass(frozen=True, slots=True)
class Delivery:
    call_id: str
    request: Any  # the validated arguments the digest covers (cross-cutting ones excluded)


# apply(current_doc) -> (new_body, result) — or raise StateRefusal. new_body None: nothing to write
# (and a body equal to the stored one is not written either: the revision stays).
Apply = Callable[[Doc], tuple[Any, dict[str, Any]]]
# also(db, before, after_body, revision): more rows a change writes in its own transaction (the
# Goal's required-input wait), called only when the document was written (never on a replay).
Also = Callable[[sqlite3.Connection, Doc, Any, int], None]


def mutate(
    store: Store, scope: str, kind: str, delivery: Delivery, apply: Apply, also: Also | None = None
) -> tuple[dict[str, Any], bool]:
    """Run ``apply`` against the current document and commit its result atomically.

    Returns (result, replayed). ``result`` is JSON-safe and is stored with the delivery; it gets
    ``revision`` set to the committed revision. Raises StateRefusal (nothing written). ``also``
    writes what goes with the change in the same transaction (a refusal there writes nothing)."""
    req_digest = digest(delivery.request)
    with store.transaction() as db:
        prior = db.execute(
            "SELECT request_digest, base_revision, result FROM work_state_deliveries"
            " WHERE scope = ? AND kind = ? AND call_id = ?",
            (scope, kind, delivery.call_id),
        ).fetchone()
        row = db.execute("SELECT revision, body FROM work_state WHERE scope = ? AND kind = ?", (scope, kind)).fetchone()
        doc = Doc(int(row[0]), json.loads(row[1])) if row else Doc(0, None)
        if prior is not None:
            if prior[0] == req_digest:
                return json.loads(prior[2]), True
            raise StateRefusal(
                "ChangedDelivery",
                f"call id {delivery.call_id!r} was already delivered with a different request.",
                "Send a new call (a new call id) for a different change.",
                callId=delivery.call_id,
                currentRevision=doc.revision,
            )
        new_body, result = apply(doc)
        revision = doc.revision
        if new_body is not None and row and canonical(new_body) == row[1]:
            # Nothing changed (a status set to itself, a patch naming no change): no new revision,
            # so the document's fingerprint — what the no_progress rule observes — stays the same.
            new_body, result = None, {**result, "unchanged": True}
        if new_body is not None:
            revision = doc.revision + 1
            now = time.time()
            if row:
                db.execute(
                    "UPDATE work_state SET revision = ?, body = ?, updated_at = ? WHERE scope = ? AND kind = ?"
                    " AND revision = ?",
                    (revision, canonical(new_body), now, scope, kind, doc.revision),
                )
            else:
                db.execute(
                    "INSERT INTO work_state (scope, kind, revision, body, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (scope, kind, revision, canonical(new_body), now),
                )
            if also is not None:
                also(db, doc, new_body, revision)
        result = {**result, "revision": revision}
        db.execute(
            "INSERT INTO work_state_deliveries (scope, kind, call_id, request_digest, base_revision, result, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (scope, kind, delivery.call_id, req_digest, doc.revision, canonical(result), time.time()),
        )
    return result, False


def check_revision(
    doc: Doc, expected: int | None, resource: str, getter: str, *, creating: bool = False, create_action: str = "create"
) -> None:
    """Every mutation of an existing document carries its current revision; only a create of a
    document that does not exist may omit it (or send 0). ``create_action``: the tool's action
    that creates the document, which a refusal names."""
    if doc.revision == 0:
        if creating and expected in (None, 0):
            return
        if not creating:
            raise StateRefusal(
                "NotFound",
                f"there is no {resource} yet.",
                f"Create it first (action {create_action}, without expected_revision), after {getter} returned null.",
                resource=resource,
                currentRevision=0,
            )
        raise stale(resource, expected, 0, getter)
    if expected != doc.revision:
        raise stale(resource, expected, doc.revision, getter)

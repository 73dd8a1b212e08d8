"""Tool-call ids a response can be trusted with: every call of the session gets its own id.

Some compatible servers send the same id for each call of an answer, or none at all, and many
number the calls of each answer afresh (``call_1`` in every answer). The transcript pairs each
result with its call by id, the terminal view and the recovery of an unmatched call do too, the
next request echoes the ids back (Anthropic refuses a conversation whose tool_use ids repeat), and
the durable-state tools take the call id as the delivery id of a mutation (a repeated id with the
same body is a repeated delivery, applied once; with another body it is refused). So before an
answer is recorded, an empty id, one repeated within the answer, or one an earlier call of the
session already used is replaced by a fresh one made from it; the rest stay exactly as the
provider sent them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from zuno.agent.types import Finished, ToolCall


def unique_call_ids(fin: Finished, used: Collection[str] = ()) -> Finished:
    """``fin`` with every tool call's id distinct, non-empty and not in ``used`` (the ids earlier
    calls of the session already have); the same object when they are."""
    calls = fin.message.tool_calls
    ids = [c.id for c in calls]
    if all(ids) and len(set(ids)) == len(ids) and not any(i in used for i in ids):
        return fin
    taken = set(ids)
    seen: set[str] = set()
    out: list[ToolCall] = []
    for i, c in enumerate(calls):
        cid = c.id
        if not cid or cid in seen or cid in used:
            stem = cid or "call"
            # Past the session's count, a reused id's fresh one is found at once: counting up from
            # 1 each time made every answer of a server that always says call_1 cost more than the
            # last (the ids taken grow with the session).
            n = len(used) + i + 1 if cid in used else i + 1
            while f"{stem}_{n}" in taken or f"{stem}_{n}" in used:
                n += 1
            cid = f"{stem}_{n}"
            taken.add(cid)
            c = dataclasses.replace(c, id=cid)
        seen.add(cid)
        out.append(c)
    return dataclasses.replace(fin, message=dataclasses.replace(fin.message, tool_calls=tuple(out)))

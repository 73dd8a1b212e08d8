"""Tool-call ids a response can be trusted with: every call of one answer gets its own id.

Some compatible servers send the same id for each call of an answer, or none at all. The
transcript pairs each result with its call by id, the terminal view and the recovery of an
unmatched call do too, and the next request echoes the ids back (Anthropic refuses a conversation
whose tool_use ids repeat). So before an answer is recorded, an empty or repeated id is replaced
by a fresh one made from it; the rest stay exactly as the provider sent them."""

from __future__ import annotations

import dataclasses

from zuno.agent.types import Finished, ToolCall


def unique_call_ids(fin: Finished) -> Finished:
    """``fin`` with every tool call's id distinct and non-empty (the same object when they are)."""
    calls = fin.message.tool_calls
    ids = [c.id for c in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return fin
    taken = set(ids)
    seen: set[str] = set()
    out: list[ToolCall] = []
    for i, c in enumerate(calls):
        cid = c.id
        if not cid or cid in seen:
            stem = cid or "call"
            n = i + 1
            while f"{stem}_{n}" in taken:
                n += 1
            cid = f"{stem}_{n}"
            taken.add(cid)
            c = dataclasses.replace(c, id=cid)
        seen.add(cid)
        out.append(c)
    return dataclasses.replace(fin, message=dataclasses.replace(fin.message, tool_calls=tuple(out)))

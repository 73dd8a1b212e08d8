"""Matching every recorded tool call with a result before the next provider request.

A process that died mid-turn can leave tool calls in the transcript with no result; the provider
would refuse the next request (an unmatched tool call), so each gets one first: the dispatcher's
settled row when it has one (after a crash, its recovery result — uncertain, nothing re-run),
else a not-started result (no intent row: the call never ran).
"""

from __future__ import annotations

import json

from zuno.agent.items import NOT_STARTED_RECOVERY_TEXT, ToolResultRow
from zuno.agent.transcript import Transcript
from zuno.store import Store


def settle_unmatched(transcript: Transcript, store: Store, session_id: str) -> None:
    unmatched = transcript.unmatched_calls()
    if not unmatched:
        return
    rows: list[ToolResultRow] = []
    step: int | None = None
    for u in unmatched:
        found = store.query(
            "SELECT * FROM calls WHERE session_id = ? AND call_id = ? AND seq > ? ORDER BY seq LIMIT 1",
            (session_id, u.call.id, u.calls_seq_floor),
        )
        if found and found[0]["state"] == "settled":
            r = found[0]
            meta = json.loads(r["metadata"]) if r["metadata"] else {}
            step = r["step"]
            rows.append(
                ToolResultRow(
                    u.call.id,
                    u.call.name,
                    r["text"] or "",
                    r["outcome"] or "uncertain",
                    r["seq"],
                    recovered=bool(meta.get("recovered")),
                    cancelled=bool(r["cancelled"]),
                )
            )
        else:
            rows.append(ToolResultRow(u.call.id, u.call.name, NOT_STARTED_RECOVERY_TEXT, "error", None, recovered=True))
    transcript.add_tool_results(unmatched[0].turn, step, rows)
    store.add_event(session_id, "agent-calls-recovered", {"calls": [r.call_id for r in rows]})

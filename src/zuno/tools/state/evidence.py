"""What makes a verification receipt count as evidence, and what retires it.

A receipt ``rcp_…`` is evidence when it exists, was recorded in this session, decided ``passed``
with ``authoritative`` status, and is still fresh.

Freshness rule (docs/state.md): a receipt is retired by any later write to the workspace. A
command's dependencies cannot be told from the command (``pytest`` reads the whole tree, ``make``
reads what its Makefile names), so Zuno takes the "to the workspace when that cannot be told" branch
for every command: any call recorded after the receipt's own call, in any session of the same
workspace root, whose metadata names ``writtenPaths`` outside Zuno's own ``.zuno/`` state (report
files are not sources) — or whose writes cannot be told at all (an ``uncertain`` outcome of a
side-effecting call, a shell call promoted to the background, which is still writing) — retires
it. A missing ``writtenPaths`` can only keep a receipt alive; that is the spec's lower bound, and
the reason the rule does not try to be narrower.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zuno.store import Store
from zuno.tools.shell.receipts import get_receipt

STATE_DIR_PREFIX = ".zuno/"


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str  # "fresh", or why the receipt does not count
    detail: str = ""


def _writes(metadata: dict[str, Any]) -> list[str]:
    paths = metadata.get("writtenPaths") or []
    return [p for p in paths if isinstance(p, str) and not p.startswith(STATE_DIR_PREFIX)]


def check(store: Store, session_id: str, receipt_id: str) -> Verdict:
    if not receipt_id.startswith("rcp_"):
        return Verdict(False, "not_a_receipt", f"{receipt_id!r} is not a verification receipt id (rcp_…)")
    r = get_receipt(store, receipt_id)
    if r is None:
        return Verdict(False, "unknown_receipt", f"no verification receipt {receipt_id} is stored")
    if r.get("session") != session_id:
        return Verdict(False, "other_session", f"{receipt_id} was recorded in another session")
    if r.get("decision") != "passed":
        return Verdict(False, "not_passed", f"{receipt_id} decided {r.get('decision')!r}, not passed")
    if r.get("authority") != "authoritative":
        return Verdict(False, "not_authoritative", f"{receipt_id} has {r.get('authority')} status, not authoritative")
    seq = r.get("callSeq")
    if not isinstance(seq, int):
        return Verdict(False, "unplaced", f"{receipt_id} names no call it came from")
    roots = store.query("SELECT root FROM sessions WHERE id = ?", (session_id,))
    root = roots[0]["root"] if roots else None
    rows = store.query(
        "SELECT c.seq, c.name, c.call_id, c.outcome, c.effect, c.metadata FROM calls c JOIN sessions s"
        " ON s.id = c.session_id WHERE s.root = ? AND c.seq > ? ORDER BY c.seq",
        (root, seq),
    )
    for row in rows:
        meta = json.loads(row["metadata"]) if row["metadata"] else {}
        written = _writes(meta)
        if written:
            return Verdict(
                False,
                "stale",
                f"{receipt_id} was retired by a later write: {row['name']} call {row['call_id']} wrote "
                + ", ".join(written[:5]),
            )
        if row["effect"] == "SideEffecting" and row["outcome"] == "uncertain":
            return Verdict(
                False,
                "stale",
                f"{receipt_id} was retired: the later {row['name']} call {row['call_id']} is uncertain, so what it "
                "wrote cannot be told",
            )
        if meta.get("writtenPathsSkipped"):
            return Verdict(
                False,
                "stale",
                f"{receipt_id} was retired: the later {row['name']} call {row['call_id']} may still be writing "
                f"({meta['writtenPathsSkipped']})",
            )
    return Verdict(True, "fresh")

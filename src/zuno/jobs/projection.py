"""The Jobs section of the dynamic context, rebuilt from the committed ``jobs`` table.

Running jobs are listed with their id, label, purpose and age. Jobs are observable, never
runnable work by themselves; a running remote observer (backgroundPurpose remoteObserver) marks
the section ``waiting_remote`` so the reconciliation driver records waiting_background.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING

from zuno.jobs.status import label_line
from zuno.projection import ContextSection

if TYPE_CHECKING:
    from zuno.store import Store

JOBS_SECTION_MAX = 20  # running jobs listed by name; the rest are counted


def jobs_section(store: Store, session_id: str) -> ContextSection | None:
    rows = store.query(
        "SELECT id, label, purpose, started_at, deadline_at FROM jobs "
        "WHERE session_id = ? AND status = 'running' AND ended_at IS NULL ORDER BY started_at",
        (session_id,),
    )
    if not rows:
        return None
    now = time.time()
    lines = [f"Background jobs still running ({len(rows)}); their completion arrives as a notice, do not poll:"]
    for r in rows[:JOBS_SECTION_MAX]:
        line = f"- {r['id']}: {label_line(r['label'], 200)} (running {now - r['started_at']:.0f}s"
        if r["purpose"]:
            line += f", backgroundPurpose {r['purpose']}"
        if r["deadline_at"]:
            line += f", deadline in {max(0.0, r['deadline_at'] - now):.0f}s"
        lines.append(line + ")")
    if len(rows) > JOBS_SECTION_MAX:
        lines.append(f"- and {len(rows) - JOBS_SECTION_MAX} more")
    fingerprint = hashlib.sha256(json.dumps([r["id"] for r in rows]).encode()).hexdigest()
    remote = any(r["purpose"] == "remoteObserver" for r in rows)
    return ContextSection("jobs", "\n".join(lines), waiting_remote=remote, fingerprint=fingerprint)

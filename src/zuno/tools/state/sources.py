"""User messages as authorization sources: the one seam between task_context (and history) and
the agent transcript.

Contract — ``lookup_message(store, session_id, message_id) -> StoredMessage | None``: the stored
message of that session with that id, with every part as stored, or None. ``source_digest`` is
the SHA-256 over all of its user-input parts in order: text, and for an attachment or image its
reference (name, media type, size) and the SHA-256 of its bytes — so a changed attachment changes
the digest although its name did not. Only ``role == "user"`` with ``origin == "user"`` can be an
authorization source; a runtime-generated report, a compaction marker or synthetic prompt text
cannot.

Until the agent transcript lands, messages are read from ``state_transcript`` (below), written by
``record_message``. The lead reconciles by pointing ``lookup_message`` and ``iter_messages`` at
the transcript table (keeping the id, role, origin and parts semantics), and dropping this table.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from zuno.store import Store
from zuno.tools.state.docstore import digest

Origin = Literal["user", "runtime_report", "compaction_marker", "synthetic_prompt"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "1401_state_transcript",
        """
        CREATE TABLE state_transcript (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            origin TEXT NOT NULL CHECK (origin IN ('user', 'runtime_report', 'compaction_marker', 'synthetic_prompt')),
            parts TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX state_transcript_by_session ON state_transcript (session_id, seq)
        """,
    )
]

# Part types: {"type": "text", "text"}, {"type": "image", "media_type", "data_b64"},
# {"type": "attachment", "name", "media_type", "size", "sha256"}, and assistant-only
# {"type": "reasoning", ...} / {"type": "encrypted", ...} (never a source, never shown by history).
USER_INPUT_PARTS = ("text", "image", "attachment")


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str
    session_id: str
    seq: int
    role: str
    origin: str
    parts: list[dict[str, Any]]

    @property
    def can_authorize(self) -> bool:
        return self.role == "user" and self.origin == "user"


def _part_for_digest(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") == "image":
        raw = base64.b64decode(part.get("data_b64", ""), validate=False)
        return {"type": "image", "media_type": part.get("media_type"), "sha256": hashlib.sha256(raw).hexdigest()}
    if part.get("type") == "attachment":
        return {k: part.get(k) for k in ("type", "name", "media_type", "size", "sha256")}
    return {"type": part.get("type"), "text": part.get("text", "")}


def source_digest(msg: StoredMessage) -> str:
    return digest([_part_for_digest(p) for p in msg.parts if p.get("type") in USER_INPUT_PARTS])


def _row(r: Any) -> StoredMessage:
    return StoredMessage(r["id"], r["session_id"], r["seq"], r["role"], r["origin"], json.loads(r["parts"]))


def lookup_message(store: Store, session_id: str, message_id: str) -> StoredMessage | None:
    rows = store.query("SELECT * FROM state_transcript WHERE session_id = ? AND id = ?", (session_id, message_id))
    return _row(rows[0]) if rows else None


def iter_messages(store: Store, session_id: str) -> Iterator[StoredMessage]:
    for r in store.query("SELECT * FROM state_transcript WHERE session_id = ? ORDER BY seq", (session_id,)):
        yield _row(r)


def record_message(
    store: Store,
    session_id: str,
    parts: list[dict[str, Any]],
    *,
    role: Literal["user", "assistant"] = "user",
    origin: Origin = "user",
    message_id: str | None = None,
) -> str:
    """Store one transcript message (the agent loop's job once it has its transcript)."""
    mid = message_id or "msg_" + secrets.token_hex(8)
    with store.transaction() as db:
        (seq,) = db.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM state_transcript WHERE session_id = ?", (session_id,)
        ).fetchone()
        db.execute(
            "INSERT INTO state_transcript (id, session_id, seq, role, origin, parts, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (mid, session_id, seq, role, origin, json.dumps(parts, ensure_ascii=False), time.time()),
        )
    return mid

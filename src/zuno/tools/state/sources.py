"""User messages as authorization sources: the one seam between task_context (and history) and
the agent transcript.

Contract — ``lookup_message(store, session_id, message_id) -> StoredMessage | None``: the stored
message of that session with that id, with every part as stored, or None. ``source_digest`` is
the SHA-256 over all of its user-input parts in order: text, and for an attachment or image its
reference (name, media type, size) and the SHA-256 of its bytes — so a changed attachment changes
the digest although its name did not. Only ``role == "user"`` with ``origin == "user"`` can be an
authorization source; a runtime-generated report, a compaction marker or synthetic prompt text
cannot.

Two stores are read, so either may hold the transcript: ``state_transcript`` (below, written by
``record_message``), and — when the agent loop's migration has created it — ``agent_items``
(kind ``user`` rows with a ``msg_id`` are user messages, ``assistant`` rows assistant messages,
``notice`` rows runtime reports, ``compaction`` rows compaction markers; ``tool_result`` rows are
not messages: the ``calls`` table is their record). When the loop's transcript is the only writer,
``state_transcript`` and ``record_message`` can go.
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

from zuno import family_migrations
from zuno.store import Store
from zuno.tools.state.docstore import digest

Origin = Literal["user", "runtime_report", "compaction_marker", "synthetic_prompt"]

MIGRATIONS = family_migrations.STATE_SOURCES  # (the SQL: zuno.family_migrations)

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
    at: float = 0.0

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
    return StoredMessage(
        r["id"], r["session_id"], r["seq"], r["role"], r["origin"], json.loads(r["parts"]), r["created_at"]
    )


# agent_items kind -> (role, origin)
_AGENT_KINDS = {
    "user": ("user", "user"),
    "assistant": ("assistant", "user"),
    "notice": ("user", "runtime_report"),
    "compaction": ("user", "compaction_marker"),
}


def _agent_row(r: Any) -> StoredMessage:
    data = json.loads(r["data"])
    role, origin = _AGENT_KINDS[r["kind"]]
    parts: list[dict[str, Any]] = []
    text = data.get("summary") if r["kind"] == "compaction" else data.get("text")
    if text:
        parts.append({"type": "text", "text": text})
    for img in data.get("images") or []:
        parts.append({"type": "image", "media_type": img.get("media_type"), "data_b64": img.get("data_b64", "")})
    for att in data.get("attachments") or []:
        parts.append({"type": "attachment", **{k: att.get(k) for k in ("name", "media_type", "size", "sha256")}})
    for opaque in data.get("opaque") or []:
        parts.append({"type": "reasoning", "opaque": opaque})  # never a source, never shown
    mid = r["msg_id"] or f"item_{r['seq']}"
    return StoredMessage(mid, r["session_id"], r["seq"], role, origin, parts, r["at"])


def has_agent_items(store: Store) -> bool:
    return bool(store.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_items'"))


def lookup_message(store: Store, session_id: str, message_id: str) -> StoredMessage | None:
    rows = store.query("SELECT * FROM state_transcript WHERE session_id = ? AND id = ?", (session_id, message_id))
    if rows:
        return _row(rows[0])
    if has_agent_items(store):
        found = store.query(
            "SELECT * FROM agent_items WHERE session_id = ? AND msg_id = ? AND kind IN ('user', 'assistant', 'notice',"
            " 'compaction') ORDER BY seq LIMIT 1",
            (session_id, message_id),
        )
        if found:
            return _agent_row(found[0])
    return None


def iter_messages(store: Store, session_id: str) -> Iterator[StoredMessage]:
    """Every stored message of the session in time order, from both stores."""
    out = [
        _row(r) for r in store.query("SELECT * FROM state_transcript WHERE session_id = ? ORDER BY seq", (session_id,))
    ]
    if has_agent_items(store):
        out += [
            _agent_row(r)
            for r in store.query(
                "SELECT * FROM agent_items WHERE session_id = ?"
                " AND kind IN ('user', 'assistant', 'notice', 'compaction')"
                " ORDER BY seq",
                (session_id,),
            )
        ]
    out.sort(key=lambda m: m.at)
    yield from out


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

"""What the store answers about what it recorded: sessions, calls (the unsettled ones for
recovery), events and artifacts. Read-only queries on the store's connection (``Transactions``)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from zuno.store.transaction import Transactions


@dataclass(slots=True)
class CallRow:
    seq: int
    session_id: str
    step: int
    idx: int
    call_id: str
    name: str
    arguments: Any
    effect: str
    replay: str
    concurrency: str
    state: str
    attempt: int
    outcome: str | None
    block_kind: str | None
    cancelled: bool
    text: str | None
    metadata: dict[str, Any]
    started_at: float | None
    ended_at: float | None


def call_row(r: sqlite3.Row) -> CallRow:
    return CallRow(
        seq=r["seq"],
        session_id=r["session_id"],
        step=r["step"],
        idx=r["idx"],
        call_id=r["call_id"],
        name=r["name"],
        arguments=json.loads(r["arguments"]),
        effect=r["effect"],
        replay=r["replay"],
        concurrency=r["concurrency"],
        state=r["state"],
        attempt=r["attempt"],
        outcome=r["outcome"],
        block_kind=r["block_kind"],
        cancelled=bool(r["cancelled"]),
        text=r["text"],
        metadata=json.loads(r["metadata"]) if r["metadata"] else {},
        started_at=r["started_at"],
        ended_at=r["ended_at"],
    )


def calls(tx: Transactions, session_id: str, step: int | None = None) -> list[CallRow]:
    if step is None:
        rows = tx.query("SELECT * FROM calls WHERE session_id = ? ORDER BY step, idx, seq", (session_id,))
    else:
        rows = tx.query("SELECT * FROM calls WHERE session_id = ? AND step = ? ORDER BY idx, seq", (session_id, step))
    return [call_row(r) for r in rows]


def unsettled_calls(tx: Transactions, session_id: str) -> list[CallRow]:
    """The calls of the session whose intent row has no result (recovery settles them)."""
    rows = tx.query("SELECT * FROM calls WHERE session_id = ? AND state = 'started' ORDER BY seq", (session_id,))
    return [call_row(r) for r in rows]


def events(tx: Transactions, session_id: str) -> list[dict[str, Any]]:
    rows = tx.query("SELECT * FROM events WHERE session_id = ? ORDER BY seq", (session_id,))
    return [
        {
            "seq": r["seq"],
            "step": r["step"],
            "call_seq": r["call_seq"],
            "call_id": r["call_id"],
            "kind": r["kind"],
            "data": json.loads(r["data"]),
            "at": r["at"],
        }
        for r in rows
    ]


def session_exists(tx: Transactions, session_id: str) -> bool:
    return bool(tx.query("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))


def session_root(tx: Transactions, session_id: str) -> str | None:
    """The workspace root a session belongs to, or None when there is no such session."""
    rows = tx.query("SELECT root FROM sessions WHERE id = ?", (session_id,))
    return str(rows[0][0]) if rows else None


def latest_session(tx: Transactions, root: str | None = None) -> str | None:
    """The most recently active session (of this workspace root, when given), or None."""
    where, params = ("WHERE s.root = ?", (root,)) if root is not None else ("", ())
    rows = tx.query(
        "SELECT s.id FROM sessions s LEFT JOIN steps t ON t.session_id = s.id "
        f"{where} GROUP BY s.id ORDER BY MAX(COALESCE(t.started_at, s.created_at)) DESC, s.rowid DESC LIMIT 1",
        params,
    )
    return str(rows[0][0]) if rows else None


def list_sessions(tx: Transactions, root: str | None = None) -> list[dict[str, Any]]:
    """Every session (of this workspace root, when given), most recently active first: id,
    root, profile, started (epoch seconds), last step (its number and start), calls, open jobs."""
    where, params = ("WHERE s.root = ?", (root,)) if root is not None else ("", ())
    has_jobs = bool(tx.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"))
    jobs = "(SELECT COUNT(*) FROM jobs j WHERE j.session_id = s.id AND j.ended_at IS NULL)" if has_jobs else "0"
    rows = tx.query(
        "SELECT s.id, s.root, s.profile, s.created_at,"
        " MAX(s.last_step, COALESCE((SELECT MAX(t.n) FROM steps t WHERE t.session_id = s.id), 0)) AS last_step,"
        " (SELECT MAX(t.started_at) FROM steps t WHERE t.session_id = s.id) AS last_step_at,"
        " (SELECT COUNT(*) FROM calls c WHERE c.session_id = s.id) AS calls,"
        f" {jobs} AS open_jobs FROM sessions s {where}"
        " ORDER BY COALESCE(last_step_at, s.created_at) DESC, s.rowid DESC",
        params,
    )
    return [
        {
            "id": r["id"],
            "root": r["root"],
            "profile": r["profile"],
            "started_at": r["created_at"],
            "last_step": r["last_step"],
            "last_step_at": r["last_step_at"],
            "calls": r["calls"],
            "open_jobs": r["open_jobs"],
        }
        for r in rows
    ]

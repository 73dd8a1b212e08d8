"""Deleting a session's records: every row the store holds of one session, in one transaction.

Which tables hold a session's rows is read from the schema itself (every table with a
``session_id`` column), so a table a later migration adds is covered without a change here. Two
kinds of rows are keyed otherwise: a provider request's attempts (by the request), and the durable
work state (Plan, Todo, Goal, task context, notes: by a scope naming the session). What belongs to
the workspace rather than to one session — its memory and the proposals waiting for review — is
kept.
"""

from __future__ import annotations

import sqlite3

from zuno.store.transaction import Transactions

# The workspace's own tables: kept when a session that wrote to them goes.
WORKSPACE_TABLES = frozenset({"state_memory", "state_memory_proposals"})
# The scopes of the durable work state that belong to one session (tools/state: plan.scope_of,
# notes._scope): exactly "session:<id>", and "notes:<id>:<agent>".
_SESSION_SCOPE = "session:{id}"
_NOTES_SCOPE_PREFIX = "notes:{id}:"


def session_tables(db: sqlite3.Connection) -> list[str]:
    """The tables with a ``session_id`` column, the workspace's own excepted."""
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    out = []
    for name in names:
        if name in WORKSPACE_TABLES or name.startswith("sqlite_"):
            continue
        columns = {r[1] for r in db.execute(f'PRAGMA table_info("{name}")')}
        if "session_id" in columns:
            out.append(name)
    return out


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def delete_session(tx: Transactions, session_id: str) -> dict[str, int]:
    """Delete every row of ``session_id`` in one transaction; the number deleted per table."""
    counts: dict[str, int] = {}
    with tx.begin() as (db, _events):
        if _has_table(db, "agent_attempts") and _has_table(db, "agent_requests"):
            cur = db.execute(
                "DELETE FROM agent_attempts WHERE request_id IN (SELECT id FROM agent_requests WHERE session_id = ?)",
                (session_id,),
            )
            counts["agent_attempts"] = cur.rowcount
        scope = _SESSION_SCOPE.format(id=session_id)
        notes = _NOTES_SCOPE_PREFIX.format(id=session_id)
        for table in ("work_state_deliveries", "work_state"):
            if _has_table(db, table):
                cur = db.execute(
                    f"DELETE FROM {table} WHERE scope = ? OR substr(scope, 1, ?) = ?", (scope, len(notes), notes)
                )
                counts[table] = cur.rowcount
        for table in session_tables(db):  # the rows that refer to the session before the session
            cur = db.execute(f'DELETE FROM "{table}" WHERE session_id = ?', (session_id,))
            counts[table] = cur.rowcount
        counts["sessions"] = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
    return {k: v for k, v in counts.items() if v}


def session_activity(tx: Transactions, root: str) -> list[tuple[str, float]]:
    """The sessions of ``root`` with the time each was last active (its newest event, step or
    creation), most recent first."""
    rows = tx.query(
        "SELECT s.id, MAX(s.created_at,"
        " COALESCE((SELECT MAX(e.at) FROM events e WHERE e.session_id = s.id), 0),"
        " COALESCE((SELECT MAX(t.started_at) FROM steps t WHERE t.session_id = s.id), 0)) AS active"
        " FROM sessions s WHERE s.root = ? ORDER BY active DESC, s.rowid DESC",
        (root,),
    )
    return [(r["id"], float(r["active"])) for r in rows]

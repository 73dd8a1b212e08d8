"""The durable schema and its migrations.

Migrations are named and applied once each, in list order; ``schema_migrations`` records which
ran. Append new ones at the end; never edit one that has shipped.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            root TEXT NOT NULL,
            profile TEXT NOT NULL,
            last_step INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE steps (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            n INTEGER NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            PRIMARY KEY (session_id, n)
        );
        CREATE TABLE calls (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            step INTEGER NOT NULL,
            idx INTEGER NOT NULL,
            call_id TEXT NOT NULL,
            name TEXT NOT NULL,
            arguments TEXT NOT NULL,
            args_digest TEXT NOT NULL,
            effect TEXT NOT NULL,
            replay TEXT NOT NULL,
            concurrency TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('started', 'settled')),
            attempt INTEGER NOT NULL DEFAULT 1,
            outcome TEXT,
            block_kind TEXT,
            cancelled INTEGER NOT NULL DEFAULT 0,
            text TEXT,
            metadata TEXT,
            started_at REAL,
            ended_at REAL,
            recorded_at REAL NOT NULL
        );
        CREATE INDEX calls_by_session ON calls (session_id, step, idx);
        CREATE INDEX calls_unsettled ON calls (session_id, state);
        CREATE INDEX calls_by_digest ON calls (session_id, name, args_digest);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            step INTEGER,
            call_seq INTEGER,
            call_id TEXT,
            kind TEXT NOT NULL,
            data TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX events_by_session ON events (session_id, seq);
        CREATE TABLE artifacts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            call_seq INTEGER,
            path TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE read_receipts (
            session_id TEXT NOT NULL,
            path TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            call_seq INTEGER,
            at REAL NOT NULL,
            PRIMARY KEY (session_id, path)
        );
        CREATE TABLE notices (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            delivered_step INTEGER
        );
        CREATE INDEX notices_pending ON notices (session_id, delivered_step);
        """,
    ),
    (
        "0002_agent",
        """
        CREATE TABLE agent_state (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id),
            mode TEXT NOT NULL DEFAULT 'work' CHECK (mode IN ('plan', 'work', 'goal')),
            model TEXT,
            turns INTEGER NOT NULL DEFAULT 0,
            data TEXT NOT NULL DEFAULT '{}',
            updated_at REAL NOT NULL
        );
        CREATE TABLE agent_turns (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            n INTEGER NOT NULL,
            mode TEXT NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            stop_reason TEXT,
            stop_detail TEXT,
            steps INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, n)
        );
        CREATE TABLE agent_items (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            turn INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_result', 'notice', 'compaction')),
            msg_id TEXT,
            call_id TEXT,
            request_id INTEGER,
            step INTEGER,
            call_seq INTEGER,
            digest TEXT,
            data TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX agent_items_by_session ON agent_items (session_id, seq);
        CREATE INDEX agent_items_by_kind ON agent_items (session_id, kind, seq);
        CREATE TABLE agent_requests (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            turn INTEGER NOT NULL,
            purpose TEXT NOT NULL CHECK (purpose IN ('turn', 'compaction')),
            model TEXT NOT NULL,
            system_digest TEXT NOT NULL,
            context_digest TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            tool_count INTEGER NOT NULL,
            estimated_tokens INTEGER NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            status TEXT NOT NULL CHECK (status IN ('sent', 'finished', 'failed', 'interrupted')),
            stop_reason TEXT,
            provider_stop_reason TEXT,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cached_tokens INTEGER,
            error_category TEXT,
            error TEXT
        );
        CREATE INDEX agent_requests_by_session ON agent_requests (session_id, id);
        CREATE TABLE agent_attempts (
            request_id INTEGER NOT NULL REFERENCES agent_requests(id),
            number INTEGER NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL NOT NULL,
            status INTEGER,
            error_category TEXT,
            retry_after_s REAL,
            PRIMARY KEY (request_id, number)
        )
        """,
    ),
    (
        # Compaction markers are the only items looked up by kind: a partial index holds just them,
        # so writing any other item (a tool result, every step) updates one index less.
        "0003_agent_compaction_index",
        """
        DROP INDEX IF EXISTS agent_items_by_kind;
        CREATE INDEX agent_items_compactions ON agent_items (session_id, seq) WHERE kind = 'compaction'
        """,
    ),
    (
        # Recovery looks only for calls still 'started' (an intent without its result): a partial
        # index holds just those, so a call written settled at once (most are) updates no entry.
        "0004_started_calls_index",
        """
        DROP INDEX IF EXISTS calls_unsettled;
        CREATE INDEX calls_started ON calls (session_id, seq) WHERE state = 'started'
        """,
    ),
    (
        # The text of a model's answer so far, saved while it streams (at most every
        # limits.STREAM_SAVE_INTERVAL_S or STREAM_SAVE_BYTES): a process killed mid-stream keeps what
        # its user already read. The request's own columns are copied in, since its agent_requests
        # row is written with its outcome; the next turn of the session turns a row left here into
        # an interrupted request and its assistant item, and a completed request drops its row.
        "0005_agent_partials",
        """
        CREATE TABLE agent_partials (
            request_id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            turn INTEGER NOT NULL,
            purpose TEXT NOT NULL,
            model TEXT NOT NULL,
            system_digest TEXT NOT NULL,
            context_digest TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            tool_count INTEGER NOT NULL,
            estimated_tokens INTEGER NOT NULL,
            started_at REAL NOT NULL,
            text TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX agent_partials_by_session ON agent_partials (session_id, request_id)
        """,
    ),
    (
        # The process saving a streamed answer (its pid, its start time from /proc/<pid>/stat and
        # the boot's id), so a reader tells an answer still streaming from one whose process died.
        "0006_agent_partials_writer",
        """
        ALTER TABLE agent_partials ADD COLUMN writer_pid INTEGER;
        ALTER TABLE agent_partials ADD COLUMN writer_start INTEGER;
        ALTER TABLE agent_partials ADD COLUMN writer_boot TEXT
        """,
    ),
]

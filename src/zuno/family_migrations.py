"""The tool families' tables: their migrations, applied by the store after its own.

They live here, apart from their families' modules (which re-export them as ``MIGRATIONS``), so
that a command that writes the store but runs no tool (``zuno show``, ``zuno goal resume``)
migrates it without importing every tool family. ``family_migrations()`` is, in order, what
``zuno.surface.default_registry().migrations`` collects (tests/test_cli16_startup.py checks it).
"""

from __future__ import annotations

# The jobs table (zuno.jobs).
JOBS: list[tuple[str, str]] = [
    (
        "0500_jobs",
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            call_seq INTEGER,
            label TEXT NOT NULL,
            command TEXT,
            purpose TEXT,
            promoted_because TEXT,
            pid INTEGER,
            pgid INTEGER,
            log_path TEXT NOT NULL,
            started_at REAL NOT NULL,
            deadline_at REAL,
            status TEXT NOT NULL,
            returncode INTEGER,
            signal INTEGER,
            killed_by TEXT,
            guard_diagnostic TEXT,
            total_written INTEGER NOT NULL DEFAULT 0,
            exited_at REAL,
            ended_at REAL,
            completion_state TEXT,
            completion_via TEXT,
            notice_seq INTEGER,
            delivered_at REAL
        );
        CREATE INDEX jobs_session ON jobs (session_id, started_at)
        """,
    ),
    # The verification receipt of the job's own exit (a shell job): cited by its completion.
    ("0501_jobs_receipt", "ALTER TABLE jobs ADD COLUMN receipt_id TEXT"),
    # The capture was cut at the job's end: a process that left the group still held the pipe
    # (JSON: the [pid, name] pairs found holding it; NULL when the output ended by itself).
    ("0502_jobs_capture_cut", "ALTER TABLE jobs ADD COLUMN capture_cut TEXT"),
]

# Apply_patch's records (zuno.tools.patch.applier).
PATCH: list[tuple[str, str]] = [
    (
        "0600_patch_ops",
        """
        CREATE TABLE patch_ops (
            session_id TEXT NOT NULL,
            resource TEXT NOT NULL,
            op_digest TEXT NOT NULL,
            content_sha256 TEXT NOT NULL,
            role TEXT NOT NULL,
            outcome TEXT NOT NULL,
            tool TEXT NOT NULL,
            call_seq INTEGER,
            at REAL NOT NULL,
            PRIMARY KEY (session_id, resource, op_digest, content_sha256)
        );
        """,
    )
]

# The shell's verification receipts (zuno.tools.shell.receipts).
SHELL_RECEIPTS: list[tuple[str, str]] = [
    (
        "0400_shell_receipts",
        """
        CREATE TABLE shell_receipts (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            call_seq INTEGER,
            created_at REAL NOT NULL,
            authority TEXT NOT NULL,
            decision TEXT NOT NULL,
            exit_code INTEGER,
            body TEXT NOT NULL
        );
        CREATE INDEX shell_receipts_session ON shell_receipts(session_id, call_seq);
        """,
    )
]

# The state documents (zuno.tools.state.docstore).
STATE_DOCUMENTS: list[tuple[str, str]] = [
    (
        "1400_work_state",
        """
        CREATE TABLE work_state (
            scope TEXT NOT NULL,
            kind TEXT NOT NULL,
            revision INTEGER NOT NULL,
            body TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (scope, kind)
        );
        CREATE TABLE work_state_deliveries (
            scope TEXT NOT NULL,
            kind TEXT NOT NULL,
            call_id TEXT NOT NULL,
            request_digest TEXT NOT NULL,
            base_revision INTEGER,
            result TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (scope, kind, call_id)
        )
        """,
    )
]

# The messages' sources (zuno.tools.state.sources).
STATE_SOURCES: list[tuple[str, str]] = [
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

# The notes (zuno.tools.state.notes).
STATE_NOTES: list[tuple[str, str]] = [
    (
        "1402_state_notes",
        """
        CREATE TABLE state_notes (
            session_id TEXT NOT NULL,
            agent TEXT NOT NULL,
            name TEXT NOT NULL,
            revision INTEGER NOT NULL,
            content TEXT NOT NULL,
            size INTEGER NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session_id, agent, name)
        )
        """,
    )
]

# The workspace's memory (zuno.tools.state.memory).
STATE_MEMORY: list[tuple[str, str]] = [
    (
        "1403_state_memory",
        """
        CREATE TABLE state_memory (
            root TEXT NOT NULL,
            agent TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            size INTEGER NOT NULL,
            revision INTEGER NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (root, agent, key)
        );
        CREATE TABLE state_memory_proposals (
            id TEXT PRIMARY KEY,
            root TEXT NOT NULL,
            agent TEXT NOT NULL,
            op TEXT NOT NULL CHECK (op IN ('set', 'delete')),
            key TEXT NOT NULL,
            content TEXT,
            status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected')),
            session_id TEXT,
            call_id TEXT,
            created_at REAL NOT NULL,
            decided_at REAL
        )
        """,
    ),
    (
        # Two pending proposals for one key: accepting one supersedes the others (status
        # 'superseded', superseded_by the accepted id). base_revision: the entry's revision when the
        # proposal was made (0: no entry), so an accept never silently overwrites a change made since.
        "1404_state_memory_superseded",
        """
        CREATE TABLE state_memory_proposals_next (
            id TEXT PRIMARY KEY,
            root TEXT NOT NULL,
            agent TEXT NOT NULL,
            op TEXT NOT NULL CHECK (op IN ('set', 'delete')),
            key TEXT NOT NULL,
            content TEXT,
            status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected', 'superseded')),
            session_id TEXT,
            call_id TEXT,
            created_at REAL NOT NULL,
            decided_at REAL,
            superseded_by TEXT,
            base_revision INTEGER
        );
        INSERT INTO state_memory_proposals_next
            (id, root, agent, op, key, content, status, session_id, call_id, created_at, decided_at)
            SELECT id, root, agent, op, key, content, status, session_id, call_id, created_at, decided_at
            FROM state_memory_proposals;
        DROP TABLE state_memory_proposals;
        ALTER TABLE state_memory_proposals_next RENAME TO state_memory_proposals;
        CREATE INDEX state_memory_proposals_by_key ON state_memory_proposals (root, agent, key, status)
        """,
    ),
]

# The Goal's required input (zuno.tools.state.goal_input).
STATE_GOAL_INPUT: list[tuple[str, str]] = [
    (
        "1410_goal_input_requests",
        """
        CREATE TABLE goal_input_requests (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            goal_revision INTEGER NOT NULL,
            paused_revision INTEGER NOT NULL,
            question TEXT NOT NULL,
            options TEXT,
            status TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'cancelled')),
            answer TEXT,
            call_id TEXT NOT NULL,
            asked_at REAL NOT NULL,
            closed_at REAL,
            closed_revision INTEGER
        );
        CREATE INDEX goal_input_requests_session ON goal_input_requests (session_id, status)
        """,
    )
]


def family_migrations() -> list[tuple[str, str]]:
    """Every tool family's migrations, in the registry's order (its modules sorted by name: jobs,
    patch, shell, state)."""
    return [
        *JOBS,
        *PATCH,
        *SHELL_RECEIPTS,
        *STATE_DOCUMENTS,
        *STATE_SOURCES,
        *STATE_NOTES,
        *STATE_MEMORY,
        *STATE_GOAL_INPUT,
    ]

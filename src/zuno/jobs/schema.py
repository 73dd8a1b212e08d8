"""The durable record of background jobs: the ``jobs`` table (applied by the store)."""

from __future__ import annotations

MIGRATIONS = [
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

"""The durable record of background jobs: the ``jobs`` table (applied by the store)."""

from __future__ import annotations

from zuno import family_migrations

MIGRATIONS = family_migrations.JOBS  # (the SQL: zuno.family_migrations)

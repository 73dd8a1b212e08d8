"""A workspace's config and store, without its tool surface: what ``Runtime`` builds first, and
all that the commands that only look at the store use (``zuno sessions``, ``events``, ``show``,
``receipt``, ``memory``, ``goal resume``).

``Runtime`` is a ``WorkspaceStore`` that adds the surface (the tool registry, every tool family's
module and its pydantic models), MCP and sessions. A command that only reads the store builds a
``WorkspaceStore`` with ``check_surface=True``: the config is checked as the surface would check
it (the same errors, in the same order), but no tool module is imported. The store's migrations
(the tool families' tables, ``zuno.family_migrations``) are applied when it is opened for writing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from zuno.config import Config, ConfigError, load_config
from zuno.session_ids import SessionNotFound, SessionOfAnotherWorkspace, validate_session_id
from zuno.store import Store
from zuno.store.paths import StoreUnusable, check_store_path
from zuno.workspace import Workspace

Migrations = list[tuple[str, str]]


def tool_family_migrations() -> Migrations:
    """The tool families' migrations, as the default registry collects them, without importing a
    tool family (``zuno.family_migrations``)."""
    from zuno.family_migrations import family_migrations

    return family_migrations()


class WorkspaceStore:
    """The config, workspace and store of one workspace root. The store is opened on first use:
    building one writes nothing."""

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        config: Config | None = None,
        config_file: str | os.PathLike[str] | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        profile: str | None = None,
        db: str | os.PathLike[str] | None = None,
        migrations: Callable[[], Migrations] = tool_family_migrations,
        check_surface: bool = False,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ConfigError(f"root {self.root} is not a directory. Pass an existing directory as the root (--root).")
        self.config = config if config is not None else load_config(self.root, config_file, config_overrides)
        if profile is not None:
            self.config = self.config.model_copy(update={"profile": profile})
        granted = [Path(g) if Path(g).is_absolute() else self.root / g for g in self.config.workspace.granted_dirs]
        self.workspace = Workspace(self.root, granted)
        if check_surface:  # the surface's config errors, without its tools
            from zuno.surface import check_surface_config

            check_surface_config(self.config, self.root)
        named = db or os.environ.get("ZUNO_DB") or None
        # The default store lives in the workspace's state directory, made when the store is first
        # written; a named one must be in a directory that exists (a typo never creates folders).
        self._default_db = named is None
        self.db_path = Path(named).absolute() if named else self.workspace.state_dir / "zuno.db"
        self._migrations_of = migrations
        self._store: Store | None = None
        self._reader: Store | None = None

    @property
    def _migrations(self) -> Migrations:
        """The tool families' migrations the writer applies (collected when first asked for)."""
        return self._migrations_of()

    @property
    def store(self) -> Store:
        """The store, opened (and created, with the state directory) on first use."""
        if self._store is None:
            if self._default_db:
                try:
                    self.workspace.ensure_state_dir()
                except OSError as e:
                    raise StoreUnusable(
                        f"the state directory {self.workspace.state_dir} cannot be made ({e.strerror}). "
                        "Make the workspace writable, or name a store elsewhere with --db."
                    ) from None
            self._store = Store(self.db_path, self._migrations_of())
            if self._reader is not None:  # the writer answers reads from now on
                self._reader.close()
                self._reader = None
        return self._store

    def existing_store(self) -> Store | None:
        """The store if it exists, for reading: the open one, else the database opened read-only
        (nothing is created or migrated), else None when there is none yet."""
        if self._store is not None:
            return self._store
        if self._reader is None:
            if self._default_db and not self.db_path.exists() and not self.db_path.is_symlink():
                return None
            if not check_store_path(self.db_path, create=False):
                return None
            self._reader = Store(self.db_path, readonly=True)  # (read-only: nothing is migrated)
        return self._reader

    def sessions(self) -> list[dict[str, Any]]:
        """This workspace's sessions, most recently active first (see ``Store.list_sessions``)."""
        store = self.existing_store()
        if store is None:
            return []
        rows = store.list_sessions(str(self.root))
        if any(r["open_jobs"] for r in rows):
            from zuno.jobs.liveness import open_jobs

            for r in rows:  # a row left open by a process that died is not a running job
                if r["open_jobs"]:
                    r["open_jobs"] = open_jobs(store, r["id"])
        return rows

    def prune_sessions(
        self, *, older_than_s: float | None = None, keep: int | None = None, dry_run: bool = False
    ) -> Any:
        """Delete this workspace's old sessions — by age, and/or all but the ``keep`` most recently
        active — with their logs and saved outputs (never their reports); a session another process
        drives is skipped. A ``zuno.session_pruning.PruneReport``."""
        from zuno.session_pruning import prune_sessions

        return prune_sessions(self, older_than_s=older_than_s, keep=keep, dry_run=dry_run)

    def resolve_session(self, session_id: str | None = None, *, continue_latest: bool = False) -> str | None:
        """The id an entry point (CLI, MCP, agent) continues: ``session_id`` when given (validated,
        and it must exist), else the workspace's most recent session with ``continue_latest``, else
        None (a new session). Raises InvalidSessionId or SessionNotFound (SessionOfAnotherWorkspace:
        the session is another workspace root's, in a store shared with --db); writes nothing."""
        if session_id is not None:
            validate_session_id(session_id)
            store = self.existing_store()
            its_root = store.session_root(session_id) if store is not None else None
            if its_root is None:
                raise SessionNotFound(
                    f"no session {session_id!r} in {self.db_path}. Run 'zuno sessions' to list them."
                )
            if its_root != str(self.root):
                raise SessionOfAnotherWorkspace(session_id, its_root, str(self.root), self.db_path)
            return session_id
        if continue_latest:
            store = self.existing_store()
            latest = store.latest_session(str(self.root)) if store is not None else None
            if latest is None:
                raise SessionNotFound(
                    f"there is no session to continue in {self.db_path}: 'zuno run' or 'zuno call' starts one."
                )
            return latest
        return None

    def receipt(self, receipt_id: str) -> dict[str, Any] | None:
        """A stored verification receipt of a shell call (``rcp_…``), or None."""
        from zuno.tools.shell.receipts import get_receipt

        store = self.existing_store()
        return get_receipt(store, receipt_id) if store is not None else None

    def state(self, session_id: str) -> dict[str, Any]:
        """A session's durable work state: its Goal, Plan and Todo list, as the get tools return them.
        Raises InvalidSessionId, or SessionNotFound when the store has no such session."""
        from zuno.tools.state.api import read_state

        sid = self.resolve_session(session_id)
        assert sid is not None
        return read_state(self.store, sid)

    def close_stores(self) -> None:
        for store in (self._reader, self._store):
            if store is not None:
                store.close()
        self._reader = self._store = None

    async def aclose(self) -> None:
        self.close_stores()

    async def __aenter__(self) -> WorkspaceStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

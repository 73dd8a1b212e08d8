"""Pruning a workspace's old sessions: their records in the store and their files under
``.zuno/`` (background job logs, withheld outputs), never their reports.

A session is chosen by age (last active — its newest event or step — at least ``older_than_s``
ago) and/or by rank (all but the ``keep`` most recently active). Each chosen session is held (the
same lock a process driving it takes) before anything of it is deleted: a session another process
is driving is skipped, naming that process, and one that became active again since it was chosen
is skipped too. Its rows go in one transaction (``Store.delete_session``); its directories are
removed after that commit. Reports under ``.zuno/reports/`` are deliverables and stay; so does the
workspace's memory.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.session_ids import InvalidSessionId, validate_session_id
from zuno.store import SessionBusy
from zuno.workspace import ARTIFACTS_DIR

if TYPE_CHECKING:
    from zuno.workspace_store import WorkspaceStore

# A session's own directories under the state directory: its jobs' logs (jobs.manager,
# tools.shell) and its saved outputs (output.Artifacts).
SESSION_DIRS = ("logs", ARTIFACTS_DIR)


@dataclass(slots=True)
class PruneReport:
    dry_run: bool
    pruned: list[dict[str, Any]] = field(default_factory=list)  # id, last_active, rows, bytes
    skipped: list[dict[str, Any]] = field(default_factory=list)  # id, reason
    kept: int = 0  # sessions not chosen

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "pruned": self.pruned, "skipped": self.skipped, "kept": self.kept}


def choose(
    activity: list[tuple[str, float]], *, older_than_s: float | None, keep: int | None, now: float
) -> list[tuple[str, float]]:
    """Of ``activity`` (most recent first), the sessions both criteria given let go."""
    chosen = activity[keep:] if keep is not None else list(activity)
    if older_than_s is not None:
        chosen = [(sid, at) for sid, at in chosen if now - at >= older_than_s]
    return chosen


def _dirs(state_dir: Path, session_id: str) -> list[Path]:
    try:
        validate_session_id(session_id)
    except InvalidSessionId:  # never a path built from an id that is not one
        return []
    return [state_dir / name / session_id for name in SESSION_DIRS]


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    if not path.is_dir():
        return 0
    total = 0
    for top, _subdirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(top, f)).st_size
            except OSError:
                continue
    return total


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)  # a link itself, never what it points at
    elif path.is_dir():
        shutil.rmtree(path)


def prune_sessions(
    runtime: WorkspaceStore,
    *,
    older_than_s: float | None = None,
    keep: int | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    """Prune ``runtime``'s old sessions (see the module docstring). ``older_than_s`` and ``keep``
    may both be given (a session must satisfy both to go); at least one must be."""
    if older_than_s is None and keep is None:
        raise ValueError("name what to prune: sessions older than some time, or all but the most recent N.")
    if (older_than_s is not None and older_than_s < 0) or (keep is not None and keep < 0):
        raise ValueError("the age and the number of sessions to keep cannot be negative.")
    now = time.time() if now is None else now
    report = PruneReport(dry_run=dry_run)
    existing = runtime.existing_store()
    if existing is None:
        return report  # no store: nothing to prune, and nothing is created
    activity = existing.session_activity(str(runtime.root))
    chosen = choose(activity, older_than_s=older_than_s, keep=keep, now=now)
    report.kept = len(activity) - len(chosen)
    state_dir = runtime.workspace.state_dir
    if dry_run:  # (a session another process drives shows here; the real prune would keep it)
        for sid, at in chosen:
            if existing.holds_session(sid):
                report.skipped.append({"id": sid, "reason": "it is open in this process"})
                continue
            size = sum(_size(d) for d in _dirs(state_dir, sid))
            report.pruned.append({"id": sid, "last_active": at, "rows": None, "bytes": size})
        return report
    store = runtime.store
    for sid, _at in chosen:
        if store.holds_session(sid):
            report.skipped.append({"id": sid, "reason": "it is open in this process"})
            continue
        try:
            store.acquire_session(sid)
        except SessionBusy as e:
            report.skipped.append({"id": sid, "reason": str(e)})
            continue
        try:
            again = dict(store.session_activity(str(runtime.root))).get(sid)
            if again is None:
                continue  # gone meanwhile (another prune)
            if older_than_s is not None and now - again < older_than_s:
                report.skipped.append({"id": sid, "reason": "it was active again since it was chosen"})
                continue
            rows = store.delete_session(sid)
        finally:
            store.release_session(sid)
        size = 0
        for d in _dirs(state_dir, sid):
            size += _size(d)
            _remove(d)
        report.pruned.append({"id": sid, "last_active": again, "rows": sum(rows.values()), "bytes": size})
    return report

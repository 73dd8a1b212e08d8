"""The workspace a session works in: its root, the directories it was granted, and the
`.zuno/` state folder. Paths from a model are resolved here and nowhere else."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from zuno.declarations import BlockKind
from zuno.tool import Refused

STATE_DIR = ".zuno"
_STATE_GITIGNORE = "# Zuno's durable state: never committed.\n*\n"


class Workspace:
    def __init__(self, root: Path, granted: list[Path] | None = None) -> None:
        self.root = root.resolve()
        self.granted = [g.resolve() for g in (granted or [])]
        # One mutation lock per workspace within this process: file mutations validate every
        # affected file and write under it, so no two edits interleave.
        self.mutation_lock = asyncio.Lock()

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    def ensure_state_dir(self) -> Path:
        d = self.state_dir
        d.mkdir(parents=True, exist_ok=True)
        gi = d / ".gitignore"
        if not gi.exists():
            gi.write_text(_STATE_GITIGNORE)
        return d

    def roots(self) -> list[Path]:
        return [self.root, *self.granted]

    def is_inside(self, p: Path) -> bool:
        return any(p == r or p.is_relative_to(r) for r in self.roots())

    def resolve(self, raw: str, *, field: str = "path") -> Path:
        """Resolve a model-given path (relative to the root, or absolute) and refuse one outside
        the workspace and the granted directories. Symlinks are resolved before the check."""
        if not isinstance(raw, str) or raw == "":
            raise Refused(BlockKind.invalid_arguments, f"argument '{field}': give a non-empty path.")
        if "\x00" in raw:
            raise Refused(BlockKind.invalid_arguments, f"argument '{field}': a path cannot contain a NUL byte.")
        p = Path(os.path.expanduser(raw))
        if not p.is_absolute():
            p = self.root / p
        resolved = Path(os.path.realpath(p))
        if not self.is_inside(resolved):
            raise Refused(
                BlockKind.denied,
                f"argument '{field}': {raw!r} is outside the workspace {self.root}"
                + (f" and the granted directories {[str(g) for g in self.granted]}" if self.granted else "")
                + ". Use a path inside it, or grant the directory in the config (workspace.granted_dirs).",
            )
        return resolved

    def display(self, p: Path) -> str:
        """How a path is shown to the model: relative to the root when inside it."""
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)

"""apply_patch: grammar (grammar.py), matching on logical lines (matcher.py, textfile.py), what a
chunk that does not match tries next (retry.py) and the all-or-nothing applier (applier.py)."""

from __future__ import annotations

from zuno.surface import Registry
from zuno.tools.patch.applier import MIGRATIONS, ApplyPatchTool

__all__ = ["MIGRATIONS", "ApplyPatchTool", "register"]


def register(registry: Registry) -> None:
    registry.add("apply_patch", ApplyPatchTool, profiles=("zuno", "chord"))

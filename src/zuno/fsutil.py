"""Writing a file so that a reader never sees it half-written: a temporary file beside it,
flushed to disk, then renamed over it — through ``safefs``, so no link below ``beneath`` is
followed. Tools touching model-given paths call ``safefs`` with the workspace's Target directly;
this is the path-shaped entry for Zuno's own files."""

from __future__ import annotations

from pathlib import Path

from zuno import safefs


def atomic_write(path: Path, data: bytes, mode: int | None, *, beneath: Path | None = None) -> None:
    """Replace (or create) path with exactly data; mode, when given, is set before the rename.
    ``beneath`` is the trusted directory the walk starts from (default: the path's parent, as
    named); missing directories between it and the file are made without following links."""
    base = (beneath or path.parent).resolve()
    absolute = path if path.is_absolute() else Path.cwd() / path
    where = safefs.target([base], base / absolute.relative_to(base) if beneath else base / path.name)
    safefs.atomic_write(where, data, mode)

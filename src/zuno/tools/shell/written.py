"""writtenPaths, observed: each statically resolvable path the command names is examined before and
after the run, and reported only when the two observations disagree.

A deliberate lower bound. Not reported:

* a target the shell expands (``$OUT``, ``*.rs``, ``~/x``, ``{a,b}``, ``$(ls)``), a here-document and a
  redirection target — the reading (analysis.py) skips them rather than guess;
* a path outside the workspace and the granted directories;
* a deletion (the key means "this file is now here to be re-read");
* a rewrite that leaves both size and modification time unchanged;
* a command promoted to the background, and anything started with ``&`` (still writing);
* directories, and Zuno's own ``.zuno/`` state (which Zuno itself writes during the call).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from zuno.tools.shell.analysis import PathRef
from zuno.workspace import Workspace


@dataclass(frozen=True, slots=True)
class Observation:
    size: int
    mtime_ns: int


def _resolve(workdir: Path, ref: PathRef) -> Path | None:
    raw = ref.word
    if "\x00" in raw:
        return None
    p = Path(raw) if os.path.isabs(raw) else workdir / ref.base / raw
    try:
        return Path(os.path.realpath(p))
    except (OSError, ValueError):
        return None


def candidates(workspace: Workspace, workdir: Path, refs: list[PathRef]) -> list[Path]:
    out: list[Path] = []
    seen: set[Path] = set()
    state = workspace.state_dir
    for ref in refs:
        p = _resolve(workdir, ref)
        if p is None or p in seen:
            continue
        seen.add(p)
        if not workspace.is_inside(p):
            continue
        if p == state or p.is_relative_to(state):
            continue
        out.append(p)
    return out


def observe(paths: list[Path]) -> dict[Path, Observation | None]:
    obs: dict[Path, Observation | None] = {}
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            obs[p] = None
            continue
        obs[p] = Observation(st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None
    return obs


def changed(workspace: Workspace, before: dict[Path, Observation | None]) -> list[str]:
    """Paths whose file is there after the run and whose size or mtime differs from before."""
    after = observe(list(before))
    out: list[str] = []
    for p, b in before.items():
        a = after.get(p)
        if a is None:
            continue  # gone (a deletion), never a file, or unreadable: not reported
        if b is not None and a == b:
            continue  # same size and mtime: not observable, not reported
        out.append(workspace.display(p))
    return out

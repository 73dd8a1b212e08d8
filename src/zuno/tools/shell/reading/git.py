"""The pre-flight's reading: the ``git commit`` / ``git add`` statements a command runs, with
their static arguments and the directory they run in (``GitCall``).

Mixed into the walker (``walk.py``)."""

from __future__ import annotations

import os

import tree_sitter

from zuno.tools.shell.reading.model import GitCall, _State
from zuno.tools.shell.reading.words import _snippet

# The git subcommands the pre-flight inspects (`stage` is add's other name).
_GIT_WRITES = frozenset({"commit", "add", "stage"})
_GIT_VALUE_OPTS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})


class GitReading:
    """Records the git commit / git add statements for the pre-flight."""

    def git(self, n: tree_sitter.Node, words: list[str | None], st: _State, *, fed: bool = False) -> None:
        """Record a git commit / git add (`stage` is add's other name). When the subcommand is not
        literal (`git $SUB .`, `git "$@"`), it may be either: both are inspected. ``fed``: some of its
        arguments come from elsewhere (xargs, find -exec), so they are not known."""
        text = _snippet(self.src, n, 200)
        i = 1
        directory: str | None = st.base if st.dir_known else None
        while i < len(words):
            w = words[i]
            if w is None:
                break  # an expanded option: what follows cannot be read
            if w == "-C" and i + 1 < len(words):
                d = words[i + 1]
                directory = None if (d is None or directory is None) else os.path.normpath(os.path.join(directory, d))
                i += 2
                continue
            if w in _GIT_VALUE_OPTS and i + 1 < len(words):
                i += 2
                continue
            if w.startswith("-"):
                i += 1
                continue
            break
        if i >= len(words):
            return
        sub = words[i]
        if sub is None:
            for maybe in ("add", "commit"):
                self.out.git.append(GitCall(maybe, None, directory, text))
            return
        if sub == "stage":
            sub = "add"
        if sub not in ("commit", "add"):
            return
        rest = words[i + 1 :]
        unknown = fed or any(a is None for a in rest) or "{}" in rest
        args = None if unknown else tuple(a for a in rest if a is not None)
        self.out.git.append(GitCall(sub, args, directory, text))

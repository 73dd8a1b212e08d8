"""Reading a command's syntax tree (tree-sitter's bash grammar), not its characters.

What the reading finds never changes what runs; it changes the claim a receipt makes:

* a ``||`` fallback (``cargo test || true``) exits zero whatever the left side did;
* ``set +e`` / ``set +o pipefail`` turns the prologue's options back off;
* a nested ``bash -c '…'`` / ``sh -c`` runs under its own options;
* a check used as an ``if`` / ``while`` / ``until`` condition exits zero when the check fails;
* a loop reports only its last iteration (under ``all`` errexit still stops a ``for`` body);
* under ``all``, an ``&&`` chain before the last statement is exempt from ``set -e``;
* ``! cmd`` inverts (and is exempt from ``set -e``); a backgrounded ``cmd &`` is never waited for;
* PowerShell: one native command piped into another leaves ``$LASTEXITCODE`` to the second.

Text inside quotes is a string node, never a command, so ``echo 'run tests || true'`` masks nothing.
The same walk collects what the rest of the tool needs: the ``git commit`` / ``git add`` statements
(for the pre-flight) and the statically resolvable paths the command names (for writtenPaths).
zsh and ksh are read with the bash grammar (their common syntax is the same); PowerShell, for which no
grammar is installed, gets a quote-aware lexical reading of statements and pipes.

The reading is in ``reading/``: ``words`` (words and the parser), ``walk`` (the walk), ``claims``
(what each construct does to the claim), ``commands`` (one simple command), ``git`` (the
pre-flight's reading), ``powershell`` and ``model`` (what the reading produces).
"""

from __future__ import annotations

import re

import tree_sitter

from zuno.tools.shell.policy import Limitation
from zuno.tools.shell.reading.model import Analysis, GitCall, PathRef, _State
from zuno.tools.shell.reading.powershell import analyze_pwsh
from zuno.tools.shell.reading.walk import _Walker
from zuno.tools.shell.reading.words import _parser, _snippet, _where

__all__ = ["Analysis", "GitCall", "PathRef", "analyze", "analyze_pwsh"]


def _has_error(node: tree_sitter.Node) -> tuple[bool, tree_sitter.Node | None]:
    if node.is_error or node.is_missing:
        return True, node
    if not node.has_error:
        return False, None
    for c in node.children:
        bad, where = _has_error(c)
        if bad:
            return True, where
    return True, node


def analyze(command: str, *, policy: str, interpreter: str) -> Analysis:
    if interpreter == "pwsh":
        return analyze_pwsh(command)
    src = command.encode("utf-8", "surrogateescape")
    tree = _parser().parse(src)
    root = tree.root_node
    w = _Walker(src, policy, interpreter)
    bad, where = _has_error(root)
    if bad:
        w.out.parsed = False
        node = where or root
        w.out.limitations.append(
            Limitation(
                "unparsed",
                "the command could not be read as a syntax tree, so the constructs that weaken an exit status "
                "could not be ruled out",
                "fix the syntax (it may not run as intended either), or split the command into simpler ones",
                _where(node),
                _snippet(src, node),
            )
        )
    top = w.children_as_sequence(root, set())
    try:
        w.out.statements = [_snippet(src, n, 200) for n, _ in top]
        w.sequence(top, _State(""))
    except RecursionError:
        return _too_deep(command, src)
    return w.out


def _too_deep(command: str, src: bytes) -> Analysis:
    """A command nested too deeply to walk: nothing can be ruled out, and a git commit / add in it
    cannot be located, so if it may hold one, both are inspected in the working directory."""
    out = Analysis(parsed=False)
    out.limitations.append(
        Limitation(
            "unparsed",
            "the command is nested too deeply to be read, so the constructs that weaken an exit status could "
            "not be ruled out",
            "split the command into simpler ones",
            "1:1",
            _snippet(src, _parser().parse(src[:80]).root_node),
        )
    )
    if re.search(r"\b(add|commit|stage)\b", command):
        out.git = [GitCall(sub, None, None, command[:200]) for sub in ("add", "commit")]
    return out

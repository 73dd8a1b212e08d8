"""Permission rules over what a search finds: the paths a deny or ask rule covers are left out.

A rule decides a call by its subject, the search path; a search of a directory above a denied one
would still list and read what lies below it. So the rules of the search tool and, because a search
reads the files it searches, the rules of read (``permissions.SEARCHES_THAT_READ``) are applied to
every path found as well, matched as they match a path a tool opens: relative to the root and
absolute, where the file is (the walk follows no link, so a found path is the file's own location).

Three layers, cheapest first:

1. a rule over a directory's subtree (``secret/**``, ``secret/*``, an absolute one under the root,
   ``**/secret/**``) becomes an rg exclusion glob (``!/secret/``, ``!secret/``): rg does not enter
   the directory, so nothing below it is read, listed or counted (``_subtree_glob``);
2. any other rule (``*.env``, a file, a character class) filters rg's output by path before the
   collector sees it, so counts, totals and the result cap count only what may be shown; a piece of
   output that cannot hold a path the rule matches (its literal text is absent) passes untouched
   (``RuleFilter``);
3. the paths finally shown are checked against every rule once more (``RuleScope.covers``): a
   translation gone wrong can hide too much, never show a covered path.

An ask rule is treated as a deny for what a search finds (a search cannot ask about each file), and
the note says how to be asked: name such a path as the search path. A search of a path an ask rule
covers is asked about at admission like any call (the search path's forms include ``dir/``, see
``root_forms``); once approved, the rule does not hide what lies below that path.

Without permission rules nothing here runs: ``scope_for`` returns None before any work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase, translate
from pathlib import Path
from typing import Any

from zuno.config import PermissionRule
from zuno.declarations import BlockKind
from zuno.permissions import describe_rule, rule_applies
from zuno.tool import Refused, ToolContext
from zuno.workspace import Workspace

# Characters that are not literal in a rule pattern (fnmatch) or in an rg glob: a pattern or a
# name holding any of them is not translated into an rg glob (it is filtered by path instead).
_NOT_LITERAL = re.compile(r"[*?\[\]{}\\!\x00-\x1f\x7f]")
_SUBTREE = re.compile(r"^(?P<dir>[^*?\[\]]+)/\*+$")  # D/*, D/** (fnmatch's * crosses '/')
_ANY_DEPTH = re.compile(r"^\*+/(?P<name>[^*?\[\]/]+)/\*+$")  # **/N/**, */N/*
_BINARY_NOTICE = re.compile(rb': binary file matches \(found "\\0" byte around offset \d+\)$')
_LITERAL_RUN = re.compile(r"\[[^\]]*\]|[*?]")


def root_forms(workspace: Workspace, raw: str) -> tuple[str, ...]:
    """A search path's forms ending in '/' when it is a directory (``secret/``, ``/abs/root/secret/``):
    what a search of it reads is below it, so a rule over ``secret/**`` or ``secret/*`` matches the
    search of ``secret`` itself (the workspace root's relative form, ".", has none)."""
    try:
        resolved = workspace.resolve(raw)
    except Refused:
        return ()
    if not resolved.is_dir():
        return ()
    return tuple(f.rstrip("/") + "/" for f in workspace.location_forms(resolved) if f != ".")


@dataclass(slots=True)
class _Rule:
    rule: PermissionRule
    rx: re.Pattern[str]
    waived_under: tuple[str, ...] = ()  # display forms of approved roots the (ask) rule covers
    literal: bytes | None = None  # text every path it matches holds, outside the fixed prefix
    hit: bool = False  # left something out of this search
    any_depth: bool = False  # given to rg as a directory name at any depth: may have left something out

    def covers(self, forms: tuple[str, ...]) -> bool:
        rx = self.rx
        if not any(rx.match(f) for f in forms):
            return False
        display = forms[0]
        return not any(w == "." or display == w or display.startswith(w.rstrip("/") + "/") for w in self.waived_under)


@dataclass(slots=True)
class RuleScope:
    """The rules that decide which found paths a search may show, and how they are applied."""

    workspace: Workspace
    display: Callable[[str], str]  # a path rg printed as shown (the plan's)
    globs: list[str] = field(default_factory=list)  # rg arguments: the subtrees not entered
    pruned: list[_Rule] = field(default_factory=list)  # given to rg as globs (or nothing of them is searched)
    filtered: list[_Rule] = field(default_factory=list)  # applied to rg's output by path
    _real: dict[str, str] = field(default_factory=dict)  # a directory's realpath (covers)

    def forms(self, display: str) -> tuple[str, ...]:
        if display.startswith("/"):
            return (display,)
        root = str(self.workspace.root)
        return (display, (root.rstrip("/") + "/" + display) if display != "." else root)

    def covers(self, display: str, *, resolve: bool = True) -> bool:
        """Whether a path as shown is left out: a rule (pruned or filtered) covers it, as shown or
        (``resolve``) where it resolves now. rg follows no link, so a found path is where the file
        is, unless a directory on it was swapped for a link while rg walked: this last check of
        what is shown matches that path where it leads as well."""
        out = self._covers(display)
        if resolve:
            absolute = self.forms(display)[-1]
            parent, _, name = absolute.rpartition("/")
            real_parent = self._real.get(parent)
            if real_parent is None:  # one realpath per directory of the listing
                real_parent = self._real[parent] = os.path.realpath(parent or "/")
            if real_parent != parent:
                real = real_parent.rstrip("/") + "/" + name
                out = self._covers(self.workspace.display(Path(real))) or out
        return out

    def _covers(self, display: str) -> bool:
        forms = self.forms(display)
        out = False
        for r in (*self.pruned, *self.filtered):
            if r.covers(forms):
                r.hit = True
                out = True
        return out

    def keep_paths(self, paths: list[str]) -> list[str]:
        """The shown paths less any a rule covers (the last layer; normally none)."""
        return [p for p in paths if not self.covers(p)]

    def glob_filter(self, feed: Callable[[bytes], None]) -> RuleFilter | None:
        return RuleFilter(self, feed, grep=False) if self.filtered else None

    def grep_filter(self, feed: Callable[[bytes], None]) -> RuleFilter | None:
        return RuleFilter(self, feed, grep=True) if self.filtered else None

    def note(self) -> str:
        """The status line that says rules left paths out (naming the rules, not the paths)."""
        left = self._left()
        if not left:
            return ""
        denied = [describe_rule(r.rule) for r in left if r.rule.action == "deny"]
        asked = [describe_rule(r.rule) for r in left if r.rule.action == "ask"]
        parts = []
        if denied:
            parts.append("paths denied by " + " and ".join(denied))
        if asked:
            parts.append(
                "paths asked about by "
                + " and ".join(asked)
                + " (a search does not ask about each file it finds: give such a path as the search path, and "
                "that call is asked about)"
            )
        return "[left out by permission rules, and not counted: " + "; ".join(parts) + "]"

    def facts(self) -> list[dict[str, Any]]:
        """``metadata.leftOutByRules``: the rules that left paths out, as written in the config."""
        return [r.rule.model_dump(exclude_none=True) for r in self._left()]

    def _left(self) -> list[_Rule]:
        return [r for r in (*self.pruned, *self.filtered) if r.hit or r.any_depth]


def check_root(ctx: ToolContext, resolved: Path, field: str) -> None:
    """The rules again on a search path a rule covers through its ``dir/`` form (``root_forms``;
    ``ToolContext.check_location`` has checked its other forms): a deny refuses, an ask refuses
    unless this location was approved."""
    permission = ctx.config.permission
    if not permission.rules or not resolved.is_dir():
        return
    forms = tuple(f.rstrip("/") + "/" for f in ctx.workspace.location_forms(resolved) if f != ".")
    matching = [
        r for r in permission.rules
        if r.action != "allow" and r.pattern is not None and rule_applies(r, ctx.tool_name)
        and any(fnmatchcase(f, r.pattern) for f in forms)
    ]
    if not matching:
        return
    shown = repr(ctx.workspace.display(resolved))
    deny = next((r for r in matching if r.action == "deny"), None)
    if deny is not None:
        raise Refused(
            BlockKind.denied,
            f"argument '{field}': {shown} is denied by permission rule {describe_rule(deny)} (a search reads what "
            "lies below it). Nothing ran.",
        )
    if not set(ctx.workspace.location_forms(resolved)) <= ctx.approved:
        raise Refused(
            BlockKind.denied,
            f"argument '{field}': {shown} is a location permission rule {describe_rule(matching[0])} asks about, and "
            "no approval was given for it. Nothing ran; send a call that names it to be asked.",
        )


def scope_for(
    ctx: ToolContext, roots: list[Path], cwd: str, prefix: str, display: Callable[[str], str]
) -> RuleScope | None:
    """The rules that apply to what this search finds, or None when none can (no rules at all: no work).

    ``cwd``, ``prefix`` and ``display`` are the search plan's: where rg runs, what it puts before a
    path rg printed, and how that path becomes the path shown."""
    permission = ctx.config.permission
    if not permission.rules:
        return None
    tool = ctx.tool_name
    relevant = [
        r for r in permission.rules if r.action != "allow" and r.pattern is not None and rule_applies(r, tool)
    ]
    if not relevant:
        return None
    ws = ctx.workspace
    scope = RuleScope(ws, display)
    has_dirs = any(r.is_dir() for r in roots)
    root_displays = [ws.display(r) for r in roots]
    fixed = _fixed_text(ws, prefix)
    for rule in relevant:
        assert rule.pattern is not None
        rx = re.compile(translate(rule.pattern))
        waived: list[str] = []
        for r in roots:
            located = ws.location_forms(r)
            rforms = located + (tuple(f.rstrip("/") + "/" for f in located if f != ".") if r.is_dir() else ())
            # The search path is covered by this ask rule and was approved (check_root refused otherwise).
            if rule.action == "ask" and any(rx.match(f) for f in rforms) and set(located) <= ctx.approved:
                waived.append(ws.display(r))
        entry = _Rule(rule, rx, tuple(waived), _literal(rule.pattern, fixed))
        glob = None if waived or not has_dirs else _subtree_glob(ws, rule.pattern, prefix, cwd, root_displays)
        if glob is None:
            scope.filtered.append(entry)
            continue
        text, knowable = glob
        scope.pruned.append(entry)
        if text:
            scope.globs += ["--glob", text]
            # A directory that is there was left out; a name at any depth cannot be told without the walk.
            entry.hit = knowable
            entry.any_depth = not knowable
    return scope


def _subtree_glob(
    ws: Workspace, pattern: str, prefix: str, cwd: str, roots: list[str]
) -> tuple[str, bool] | None:
    """The rg exclusion glob that covers exactly the paths ``pattern`` matches, or None when there is
    none (the pattern is then applied by path). The second value says whether the directory is one
    known place (it was there: the search left it out) rather than a name at any depth.

    ``D/*`` and ``D/**`` (fnmatch's ``*`` crosses ``/``) match the paths below directory ``D`` of the
    root: rg's anchored ``!/D'/`` (D relative to rg's working directory; the trailing ``/`` matches a
    directory only, as the pattern never matches a file named ``D``). ``**/N/**`` and ``*/N/*`` match
    a path with a directory named ``N`` in its absolute form: rg's ``!N/`` below the search paths
    (a directory ``N`` above them makes the search path itself covered: ``check_root``)."""
    if prefix.startswith("/"):  # a granted directory outside the root: shown by absolute paths
        return None
    m = _ANY_DEPTH.match(pattern)
    if m is not None:
        name = m.group("name")
        if _NOT_LITERAL.search(name) or name in (".", "..") or name.strip() != name:
            return None
        return f"!{name}/", False
    m = _SUBTREE.match(pattern)
    if m is None:
        return None
    d = m.group("dir")
    root = str(ws.root).rstrip("/") + "/"
    if d.startswith("/"):
        if not d.startswith(root):
            return None
        d = d[len(root) :]
    parts = d.split("/")
    if _NOT_LITERAL.search(d) or any(p in ("", ".", "..") or p.strip() != p for p in parts):
        return None
    here = prefix.rstrip("/")  # rg's working directory, relative to the root ("" for the root)
    if here and not d.startswith(here + "/"):
        # The subtree is not below rg's working directory: either it holds the search path (which is
        # then covered, refused or approved as a whole) or it is elsewhere: nothing to leave out.
        return ("", True) if not (here == d or here.startswith(d + "/")) else None
    rel = d[len(here) + 1 :] if here else d
    if any(r == d or r.startswith(d + "/") for r in roots):
        return None  # a search path inside the subtree: covered as a whole (refused, or approved)
    if not any(r == "." or d == r or d.startswith(r.rstrip("/") + "/") for r in roots if not r.startswith("/")):
        return "", True
    if not os.path.isdir(os.path.join(cwd, rel)):
        return "", True  # nothing there to leave out (the glob is not needed)
    return f"!/{rel}/", True


def _fixed_text(ws: Workspace, prefix: str) -> str:
    """The text every form of a found path starts with before rg's part: the absolute form's."""
    if prefix.startswith("/"):
        return prefix
    return str(ws.root).rstrip("/") + "/" + prefix


def _literal(pattern: str, fixed: str) -> bytes | None:
    """The longest literal run of ``pattern`` that every path it matches must hold in the part rg
    printed (not in, nor overlapping, the fixed prefix of its forms), or None when there is none
    (every piece of output is then checked path by path)."""
    runs = [s for s in _LITERAL_RUN.split(pattern) if s]
    # every part of a literal run is held too: "**/.env" holds "/.env", whose "/" the prefix may give
    subs = sorted({run[i:] for run in runs for i in range(len(run))}, key=len, reverse=True)
    for sub in subs:
        if "\n" in sub or "\0" in sub or sub in fixed:
            continue
        if any(fixed.endswith(sub[:k]) for k in range(1, len(sub))):
            continue
        return sub.encode("utf-8", "surrogateescape")
    return None


class RuleFilter:
    """Filters rg's output by path before the collector sees it: the records of a path a rule covers
    are dropped. glob: ``path NUL`` each; grep: ``path NUL line(:|-)text LF`` (a path may hold a
    newline; a named binary file's notice has no NUL). Only whole records are passed on; a piece that
    holds no rule's literal text is passed on as it is."""

    def __init__(self, scope: RuleScope, feed: Callable[[bytes], None], *, grep: bool) -> None:
        self.scope = scope
        self.feed_on = feed
        self.grep = grep
        self.pending = b""
        self.literals: list[bytes] | None = []
        for r in scope.filtered:
            if r.literal is None:
                self.literals = None  # some rule can match any path: check every record
                break
            self.literals.append(r.literal)
        self._decided: dict[bytes, bool] = {}

    def feed(self, chunk: bytes) -> None:
        data = self.pending + chunk if self.pending else chunk
        if self.grep:
            z = data.rfind(b"\0")
            cut = data.find(b"\n", z) + 1 if z >= 0 else 0
        else:
            cut = data.rfind(b"\0") + 1
        if cut <= 0:
            self.pending = data
            return
        head, self.pending = (data, b"") if cut == len(data) else (data[:cut], data[cut:])
        self._pass(head)

    def finish(self) -> None:
        """Passes on what is left (a trailing notice, or a last record without its end)."""
        if self.pending:
            rest, self.pending = self.pending, b""
            self._pass(rest, final=True)

    def _pass(self, head: bytes, final: bool = False) -> None:
        lits = self.literals
        if lits is not None and not any(lit in head for lit in lits):
            self.feed_on(head)
            return
        out = self._grep_records(head) if self.grep else self._glob_records(head, final)
        if out:
            self.feed_on(out)

    def _covered(self, key: bytes) -> bool:
        seen = self._decided.get(key)
        if seen is None:
            display = self.scope.display(key.decode("utf-8", "surrogateescape"))
            forms = self.scope.forms(display)
            seen = False
            for r in self.scope.filtered:
                if r.covers(forms):
                    r.hit = True
                    seen = True
            if len(self._decided) < 4096:
                self._decided[key] = seen
        return seen

    def _glob_records(self, head: bytes, final: bool) -> bytes:
        parts = head.split(b"\0")
        last = parts.pop()  # "" after the last NUL (or, at the end, a path without one)
        kept = [p for p in parts if not self._covered(p)]
        out = b"\0".join(kept) + b"\0" if kept else b""
        if last and final and not self._covered(last):
            out += last
        return out

    def _grep_records(self, head: bytes) -> bytes:
        out: list[bytes] = []
        pos, n = 0, len(head)
        start = 0  # where the run of kept records being gathered begins
        while pos < n:
            z = head.find(b"\0", pos)
            nl = head.find(b"\n", pos)
            if nl >= 0 and (z < 0 or nl < z) and _BINARY_NOTICE.search(head, pos, nl):
                line = head[pos:nl]
                key = line[: line.rfind(b": binary file matches")]
                end = nl + 1
            elif z >= 0:
                key = head[pos:z]
                nl = head.find(b"\n", z)
                end = nl + 1 if nl >= 0 else n
            else:  # no record starts here (only at the very end: passed on as it is)
                break
            if self._covered(key):
                if start < pos:
                    out.append(head[start:pos])
                start = end
            pos = end
        if start < n:
            out.append(head[start:])
        return b"".join(out)

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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter
import tree_sitter_bash

from zuno import limits
from zuno.tools.shell.policy import Limitation

SHELL_NAMES = frozenset({"bash", "sh", "zsh", "ksh", "ksh93", "mksh", "dash", "ash", "busybox", "fish", "yash"})
PWSH_NAMES = frozenset({"pwsh", "powershell", "pwsh.exe", "powershell.exe"})
_WAIT_PROGRAMS = frozenset({"sleep", "true", ":", "echo", "printf", "date", "wait"})
_SHORT_GIT = frozenset(
    "git " + s
    for s in (
        "status",
        "log",
        "diff",
        "show",
        "rev-parse",
        "branch",
        "describe",
        "ls-files",
        "ls-remote",
        "remote",
        "config",
        "tag",
        "stash",
        "shortlog",
        "rev-list",
        "cat-file",
        "merge-base",
        "blame",
        "grep",
    )
)
# Per wrapper: the options that take the next word as their value, and how many operands come
# before the program it runs (timeout DURATION, taskset MASK, flock FILE, chrt PRIORITY).
_WRAPPER_SPECS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "sudo": (
        frozenset(
            {
                "-u",
                "--user",
                "-g",
                "--group",
                "-h",
                "--host",
                "-p",
                "--prompt",
                "-C",
                "--close-from",
                "-D",
                "--chdir",
                "-r",
                "--role",
                "-t",
                "--type",
                "-U",
                "--other-user",
                "-T",
                "--command-timeout",
            }
        ),
        0,
    ),
    "doas": (frozenset({"-u", "-C"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata"}), 0),
    "nohup": (frozenset(), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "time": (frozenset({"-o", "--output", "-f", "--format"}), 0),
    "xargs": (
        frozenset(
            {
                "-a",
                "--arg-file",
                "-d",
                "--delimiter",
                "-E",
                "-I",
                "-L",
                "--max-lines",
                "-n",
                "--max-args",
                "-P",
                "--max-procs",
                "-s",
                "--max-chars",
            }
        ),
        0,
    ),
    "parallel": (frozenset({"-j", "--jobs", "-S", "--sshlogin"}), 0),
    "exec": (frozenset({"-a"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "--input", "-o", "--output", "-e", "--error"}), 0),
    "setsid": (frozenset(), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "unbuffer": (frozenset(), 0),
    "watch": (frozenset({"-n", "--interval", "-d", "--differences", "-q", "--equexit"}), 0),
    "strace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-b", "-E", "-I", "-O", "-P", "-S", "-X"}), 0),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-l", "-L", "-x"}), 0),
    "caffeinate": (frozenset({"-t", "-w"}), 0),
    "runuser": (frozenset({"-u", "--user", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"}), 0),
}
# Programs that run the rest of their arguments as a command.
WRAPPERS = frozenset(_WRAPPER_SPECS)
# The git subcommands the pre-flight inspects (`stage` is add's other name).
_GIT_WRITES = frozenset({"commit", "add", "stage"})
_GIT_VALUE_OPTS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
LOOP_TYPES = frozenset({"for_statement", "c_style_for_statement", "while_statement"})
GLOB_CHARS = frozenset("*?[")


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@dataclass(frozen=True, slots=True)
class GitCall:
    """A ``git commit`` / ``git add`` the command runs: its subcommand, its static arguments after
    the subcommand (None when one of them is expanded by the shell), and the directory it runs in
    relative to the call's workdir (None when a ``cd`` / ``-C`` could not be resolved)."""

    sub: str
    args: tuple[str, ...] | None
    directory: str | None
    text: str


@dataclass(frozen=True, slots=True)
class PathRef:
    """A path the command names literally, and the directory it is relative to (relative to the
    workdir, after static ``cd``)."""

    word: str
    base: str


@dataclass(slots=True)
class Analysis:
    parsed: bool = True
    limitations: list[Limitation] = field(default_factory=list)
    git: list[GitCall] = field(default_factory=list)
    paths: list[PathRef] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)  # top-level statements, in order
    backgrounded: bool = False
    unresolved_dir: bool = False  # a cd the reading could not follow
    programs: list[str | None] = field(default_factory=list)  # every program run (git as "git SUB"); None = expanded

    @property
    def deliberate_wait(self) -> bool:
        """Only deliberate waiting (``sleep``) plus short git queries: such a command is not promoted
        to the background; it keeps the foreground cap."""
        if not self.parsed or not self.programs or None in self.programs:
            return False
        if "sleep" not in self.programs:
            return False
        return all(p in _WAIT_PROGRAMS or p in _SHORT_GIT for p in self.programs)

    @property
    def promotable(self) -> bool:
        return self.parsed and not self.deliberate_wait

    @property
    def last_statement(self) -> str | None:
        return self.statements[-1] if self.statements else None


# -- static words ------------------------------------------------------------------------------


def _text(src: bytes, node: tree_sitter.Node) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")


_DQ_ESCAPES = re.compile(r'\\([\\"$`\n])')


def static_word(src: bytes, node: tree_sitter.Node) -> str | None:
    """The literal value of a word the shell does not expand, else None."""
    t = node.type
    if t == "word":
        raw = _text(src, node)
        if raw.startswith("~") or any(c in GLOB_CHARS for c in raw.replace("\\*", "").replace("\\?", "")):
            return None
        if "{" in raw and "," in raw:
            return None
        return re.sub(r"\\(.)", r"\1", raw)
    if t == "raw_string":
        raw = _text(src, node)
        return raw[1:-1]
    if t == "string":
        parts = []
        for c in node.named_children:
            if c.type != "string_content":
                return None
            parts.append(_DQ_ESCAPES.sub(r"\1", _text(src, c)))
        return "".join(parts)
    if t == "number":
        return _text(src, node)
    if t == "concatenation":
        parts = []
        for c in node.children:
            v = static_word(src, c)
            if v is None:
                return None
            parts.append(v)
        return "".join(parts)
    return None


def _where(node: tree_sitter.Node) -> str:
    row, col = node.start_point
    return f"{row + 1}:{col + 1}"


def _snippet(src: bytes, node: tree_sitter.Node, n: int = 80) -> str:
    s = " ".join(_text(src, node).split())
    return s if len(s) <= n else s[: n - 1] + "…"


# -- the walk ----------------------------------------------------------------------------------


@dataclass
class _State:
    base: str | None  # directory relative to the workdir after static cd; None = unknown
    background: bool = False
    # False after a `cd` that may not have happened (`[ -d x ] && cd x; …`): paths are still looked
    # for there (what changed is observed, never guessed), but a git statement's directory is unknown.
    dir_known: bool = True
    expanded: bool = False  # inside `$(…)`: its words are the shell's expansion, not named paths

    def inner(self, *, background: bool | None = None, expanded: bool | None = None) -> _State:
        return _State(
            self.base,
            self.background if background is None else background,
            self.dir_known,
            self.expanded if expanded is None else expanded,
        )


_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_SUB_PUNCT = frozenset({"$(", ")", "`", "<(", ">("})
_STATEMENT_TYPES = frozenset(
    {
        "list",
        "pipeline",
        "negated_command",
        "redirected_statement",
        "command",
        "subshell",
        "compound_statement",
        "if_statement",
        "case_statement",
        "function_definition",
        "declaration_command",
        "variable_assignment",
        "variable_assignments",
        "test_command",
        *LOOP_TYPES,
    }
)
_DURATION = re.compile(r"[0-9.]+[smhd]?")


class _Walker:
    def __init__(self, src: bytes, policy: str, interpreter: str) -> None:
        self.src = src
        self.policy = policy
        self.interpreter = interpreter
        self.out = Analysis()
        self._seen: set[tuple[str, int]] = set()
        # Variables the command assigns a literal value (`GIT=/usr/bin/git`), so `$GIT commit` reads
        # as the program it is. Over-approximated (an assignment in a branch counts everywhere after
        # it): it only names programs, never paths.
        self.vars: dict[str, str] = {}
        self.depth = 0
        self._stdin: str | None = None  # a literal script fed to the statement being read (heredoc)

    def limit(self, construct: str, node: tree_sitter.Node, text: str, remedy: str) -> None:
        key = (construct, node.start_byte)
        if key in self._seen:
            return
        self._seen.add(key)
        self.out.limitations.append(Limitation(construct, text, remedy, _where(node), _snippet(self.src, node)))

    # A sequence of statements: program, compound_statement, do_group, subshell, then/else bodies.
    def sequence(self, nodes: list[tuple[tree_sitter.Node, bool]], st: _State, *, final: bool = True) -> None:
        """nodes: (statement, backgrounded) in order. The last one decides the sequence's status, and
        is final only when the sequence itself is."""
        for i, (n, bg) in enumerate(nodes):
            last = final and i == len(nodes) - 1
            if bg:
                self.background(n)
                self.statement(n, st.inner(background=True), final=False)
                continue
            self.statement(n, st, final=last)

    def background(self, n: tree_sitter.Node) -> None:
        self.out.backgrounded = True
        self.limit(
            "background",
            n,
            "a command started with `&` (or `coproc`) is never waited for, so its exit status reaches nothing",
            "run it in the foreground, or `wait` for it and check its status",
        )

    def children_as_sequence(self, node: tree_sitter.Node, skip: set[str]) -> list[tuple[tree_sitter.Node, bool]]:
        items: list[tuple[tree_sitter.Node, bool]] = []
        for c in node.children:
            if c.type == "&" and items:
                items[-1] = (items[-1][0], True)
                continue
            if not c.is_named or c.type in skip or c.type in ("comment", "heredoc_body"):
                continue
            items.append((c, False))
        return items

    def statement(self, n: tree_sitter.Node, st: _State, *, final: bool) -> None:
        t = n.type
        if t == "list":
            self.list_(n, st, final=final)
        elif t == "pipeline":
            for c in n.named_children:
                self.statement(c, st.inner(), final=final)
        elif t == "negated_command":
            self.negation(n)
            for c in n.named_children:
                self.statement(c, st.inner(), final=False)
        elif t == "redirected_statement":
            self.redirected(n, st, final=final)
        elif t == "command":
            self.command(n, st)
        elif t == "subshell":
            self.sequence(self.children_as_sequence(n, set()), st.inner(), final=final)
        elif t == "compound_statement":
            if n.children and n.children[0].type == "((":  # arithmetic: `(( $(check) + 1 ))`
                self.substitutions(n, st)
                return
            inner = st.inner()
            self.sequence(self.children_as_sequence(n, set()), inner, final=final)
            st.base, st.dir_known = inner.base, inner.dir_known
        elif t == "if_statement":
            self.if_(n, st, final=final)
        elif t in LOOP_TYPES:
            self.loop(n, st)
        elif t == "case_statement":
            value = n.child_by_field_name("value")
            if value is not None:
                self.substitutions(value, st)
            moved = False
            for item in n.named_children:
                if item.type == "case_item":
                    inner = st.inner()
                    self.sequence(
                        [(c, False) for c in item.named_children if c.type not in _CASE_SKIP], inner, final=final
                    )
                    moved = moved or inner.base != st.base
            if moved:
                st.base = None
        elif t == "function_definition":
            body = n.child_by_field_name("body")
            if body is not None:
                self.statement(body, st.inner(), final=True)
        elif t == "declaration_command":
            self.substitutions(n, st)  # `local x=$(check)`: the status is local's
            self.assignments(n)
        elif t in ("variable_assignment", "variable_assignments"):
            self.assignment_statement(n, st, final=final)
        elif t == "test_command":
            self.substitutions(n, st)  # `[[ -z "$(check)" ]]`: the test's status, not the check's
        # other node types hold no command whose status matters here

    def negation(self, n: tree_sitter.Node) -> None:
        self.limit(
            "negation",
            n,
            "`!` inverts the status (a failure becomes success) and is exempt from `set -e`",
            "drop the `!` and test the command's status directly",
        )

    def redirected(self, n: tree_sitter.Node, st: _State, *, final: bool) -> None:
        """A statement with redirections. A here-document's line may go on after its start
        (`cat <<EOF && make || true`): tree-sitter hangs that rest under the redirection."""
        body = n.child_by_field_name("body")
        redirects = [c for c in n.named_children if c is not body]
        rest: list[tuple[str, tree_sitter.Node]] = []
        stdin: str | None = None
        for r in redirects:
            op = ""
            for c in r.children:
                if c.type in ("&&", "||", "|", "|&", ";", "&"):
                    op = c.type
                elif c.type in _STATEMENT_TYPES and op:
                    rest.append((op, c))
                elif c.type == "pipeline":  # `cat <<EOF | sh`: the pipe is inside this node
                    rest.extend(("|", cc) for cc in c.named_children)
                elif c.type == "heredoc_body":
                    if self._literal_heredoc(r):
                        stdin = _text(self.src, c)
                    else:
                        self.substitutions(c, st)  # an unquoted body's `$(…)` runs
                elif r.type != "heredoc_redirect" or c.type not in ("heredoc_start", "heredoc_end"):
                    self.substitutions(c, st)  # `make > "$(check)/log"`, `cat < <(check)`
        if body is not None:
            saved, self._stdin = self._stdin, stdin
            try:
                self.statement(body, st, final=final and not rest)
            finally:
                self._stdin = saved
        for i, (op, c) in enumerate(rest):
            last = i == len(rest) - 1
            if op == "&":
                self.background(body or n)
            if op == "||" and not self._preserves_failure(c):
                self.or_fallback(n)
            if op == "&&" and self.policy == "all" and not (final and last):
                self.and_chain(n)
            self.statement(c, st, final=final and last)

    def _literal_heredoc(self, redirect: tree_sitter.Node) -> bool:
        for c in redirect.children:
            if c.type == "heredoc_start":
                raw = _text(self.src, c)
                return any(q in raw for q in ("'", '"', "\\"))
        return False

    def or_fallback(self, n: tree_sitter.Node) -> None:
        self.limit(
            "or-fallback",
            n,
            "a `||` fallback runs when the command before it fails and its own status replaces the "
            "failure, so the command can exit zero whatever that command did",
            "drop the `|| …` fallback, or end it with `exit 1` so a failure still fails",
        )

    def and_chain(self, n: tree_sitter.Node) -> None:
        self.limit(
            "and-chain",
            n,
            "under exitPolicy all, a failing command in an `&&` chain before the last statement does not "
            "stop the script (it is exempt from `set -e`), so a later statement decides the status",
            "split the chain into separate statements, or make it the last statement",
        )

    def list_(self, n: tree_sitter.Node, st: _State, *, final: bool) -> None:
        """`a && b || c …`: tree-sitter nests it to the left; it is read as one flat chain (a long
        chain must not exhaust the stack)."""
        links: list[tuple[tree_sitter.Node, str, tree_sitter.Node]] = []  # (list node, operator, right)
        node = n
        while node.type == "list":
            kids = [c for c in node.children if c.type != "comment"]
            ops = [c for c in kids if c.type in ("&&", "||")]
            operands = [c for c in kids if c.is_named]
            if len(operands) != 2 or len(ops) != 1:
                for c in operands:
                    self.statement(c, st, final=False)
                return
            links.append((node, ops[0].type, operands[1]))
            node = operands[0]
        links.reverse()
        before = st.base
        self.statement(node, st, final=False)
        for i, (at, op, right) in enumerate(links):
            last = i == len(links) - 1
            if op == "||" and not self._preserves_failure(right):
                self.or_fallback(at)
            elif op == "&&" and self.policy == "all" and not (final and last):
                self.and_chain(at)
            self.statement(right, st, final=final and last)
        if st.base != before:
            st.dir_known = False  # a `cd` inside a chain may or may not have happened after it

    def _preserves_failure(self, node: tree_sitter.Node) -> bool:
        """`a || exit 1`, `a || exit`, `a || exit $?`, `a || false`, `a || { echo msg; exit 2; }`
        keep a failure a failure."""
        if node.type == "compound_statement" or node.type == "subshell":
            stmts = [c for c in node.named_children if c.type != "comment"]
            return bool(stmts) and self._preserves_failure(stmts[-1])
        if node.type != "command":
            return False
        words = self.words(node)
        if not words or words[0] is None:
            return False
        name = words[0]
        if name == "false" and len(words) == 1:
            return True
        if name in ("exit", "return"):
            if len(words) == 1:
                return True  # the status of the command that failed
            args = [c for c in node.named_children if c.type != "command_name"]
            if args and _text(self.src, args[0]).strip("\"'") in ("$?", "${?}"):
                return True
            code = words[1]
            return code is not None and code.isdigit() and int(code) % 256 != 0
        return False

    def if_(self, n: tree_sitter.Node, st: _State, *, final: bool) -> None:
        before = st.base
        conds = [c for i, c in enumerate(n.children) if n.field_name_for_child(i) == "condition" and c.is_named]
        for c in conds:
            self._condition(c, st, "an `if` condition")
        for c in n.named_children:
            if c in conds:
                continue
            if c.type == "elif_clause":
                seen_then = False
                body: list[tuple[tree_sitter.Node, bool]] = []
                for cc in c.children:
                    if cc.type == "then":
                        seen_then = True
                        continue
                    if not cc.is_named or cc.type == "comment":
                        continue
                    if not seen_then:
                        self._condition(cc, st, "an `elif` condition")
                    else:
                        body.append((cc, False))
                self.sequence(body, st.inner(), final=final)
            elif c.type == "else_clause":
                self.sequence(self.children_as_sequence(c, set()), st.inner(), final=final)
            else:
                self.statement(c, st.inner(), final=final)
        if st.base != before:
            st.base = None

    def _condition(self, c: tree_sitter.Node, st: _State, what: str) -> None:
        if c.type != "test_command":
            self.limit(
                "condition",
                c,
                f"a check used as {what} exits zero when the check fails: the failure only chooses a branch",
                "run the check as its own statement so its status is the command's, or `exit 1` in the failing branch",
            )
        else:
            self.limit(
                "condition",
                c,
                f"a test used as {what} only chooses a branch; the statement exits zero either way",
                "`exit 1` in the branch taken when the test fails, if the test is meant to decide",
            )
        self.statement(c, st.inner(), final=False)

    def loop(self, n: tree_sitter.Node, st: _State) -> None:
        before = st.base
        if n.type == "while_statement":
            kw = n.children[0].type if n.children else "while"
            for i, c in enumerate(n.children):
                if n.field_name_for_child(i) == "condition" and c.is_named:
                    self._condition(c, st, f"a `{kw}` condition")
        else:
            for i, c in enumerate(n.children):  # `for x in $(check)`: the list's checks are discarded
                if n.field_name_for_child(i) != "body" and c.is_named:
                    self.substitutions(c, st)
        if n.type == "while_statement" or self.policy != "all":
            self.limit(
                "loop",
                n,
                "a loop's status is its last iteration's, so a failure in an earlier iteration does not reach it",
                'use exitPolicy "all" (errexit stops at the first failing iteration), or collect failures and '
                "`exit 1` after the loop",
            )
        body = n.child_by_field_name("body")
        if body is not None:
            # an iteration's last statement is not the command's: another iteration may follow
            self.sequence(self.children_as_sequence(body, {"do", "done"}), st.inner(), final=False)
        if st.base != before:
            st.base = None

    # -- commands ------------------------------------------------------------------------------

    def assignments(self, n: tree_sitter.Node) -> None:
        kids = [c for c in n.named_children if c.type == "variable_assignment"]
        nodes = [n] if n.type == "variable_assignment" else kids
        for a in nodes:
            name = a.child_by_field_name("name")
            value = a.child_by_field_name("value")
            if name is None:
                continue
            key = _text(self.src, name)
            v = static_word(self.src, value) if value is not None else ""
            if v is None:
                self.vars.pop(key, None)
            else:
                self.vars[key] = v

    def assignment_statement(self, n: tree_sitter.Node, st: _State, *, final: bool) -> None:
        """`out=$(make)` keeps make's status, so the substitution is read as the statement it is;
        with several (`a=$(x) b=$(y)`) only the last one's status survives."""
        subs = list(self._outermost_substitutions(n))
        for i, sub in enumerate(subs):
            kept = i == len(subs) - 1
            if not kept:
                self._discarded(sub)
            self.sequence(
                self.children_as_sequence(sub, set(_SUB_PUNCT)), st.inner(expanded=True), final=final and kept
            )
        self.assignments(n)

    def _outermost_substitutions(self, n: tree_sitter.Node) -> list[tree_sitter.Node]:
        found: list[tree_sitter.Node] = []
        stack = [n]
        while stack:
            c = stack.pop()
            if c.type in _SUBSTITUTIONS:
                found.append(c)
                continue
            stack.extend(reversed(c.children))
        return found

    def _discarded(self, c: tree_sitter.Node) -> None:
        what = "command substitution `$(…)`" if c.type == "command_substitution" else "process substitution"
        self.limit(
            "substitution",
            c,
            f"a {what} inside a command's arguments runs a command whose exit status is discarded, so "
            "the command can exit zero whatever that command did",
            "run the check as its own statement (or assign it alone, `out=$(…)`, which keeps its status) "
            "and use its output afterwards",
        )

    def substitutions(self, n: tree_sitter.Node, st: _State) -> None:
        """A command or process substitution inside a command's words, a redirection, a test, a
        `case` or `for` list, or a declaration such as `local x=$(…)` runs a command whose status is
        discarded: `echo "$(cargo test)"` exits zero whatever the tests did. What it runs is still
        read (a `git add` inside one is still a git add)."""
        for sub in self._outermost_substitutions(n):
            self._discarded(sub)
            self.sequence(self.children_as_sequence(sub, set(_SUB_PUNCT)), st.inner(expanded=True), final=False)

    def _program_word(self, node: tree_sitter.Node) -> list[str | None]:
        """A command name as the words it becomes: its literal value, or what a variable was
        assigned (`$GIT`; unquoted, a value with spaces splits into several words; `"$GIT"` is one)."""
        v = static_word(self.src, node)
        if v is not None:
            return [v]
        if node.type in ("simple_expansion", "expansion"):
            value = self._assigned(node)
            return (value.split() or [None]) if value is not None else [None]
        if node.type == "string" and len(node.named_children) == 1:
            return [self._assigned(node.named_children[0])]
        return [None]

    def _assigned(self, node: tree_sitter.Node) -> str | None:
        """The literal a plain `$NAME` / `${NAME}` holds, if the command assigned one."""
        if node.type not in ("simple_expansion", "expansion") or len(node.named_children) != 1:
            return None
        name = node.named_children[0]
        return self.vars.get(_text(self.src, name)) if name.type == "variable_name" else None

    def words(self, n: tree_sitter.Node) -> list[str | None]:
        out: list[str | None] = []
        for c in n.children:
            if c.type == "command_name":
                inner = c.named_children[0] if c.named_children else c
                out.extend(self._program_word(inner))
            elif c.is_named and c.type not in ("variable_assignment", "comment") and not c.type.endswith("redirect"):
                out.append(static_word(self.src, c))
        return out

    def _unwrap(self, words: list[str | None]) -> tuple[int, str | None, bool]:
        """Skip wrappers (env, sudo, timeout 10, nice -n 5, xargs -r, …) to the program they run.
        Returns (index of the program, a directory a wrapper changes to, whether the program's
        arguments come partly from elsewhere: xargs). ``env -S LINE`` splices LINE's words into
        ``words`` in place."""
        i = 0
        chdir: str | None = None
        fed = False
        while i < len(words):
            w = words[i]
            if w is None:
                break
            base = os.path.basename(w)
            spec = _WRAPPER_SPECS.get(base)
            if spec is None:
                break
            value_opts, positional = spec
            fed = fed or base in ("xargs", "parallel")
            i += 1
            while i < len(words):
                a = words[i]
                if a is None:
                    return i, chdir, fed
                if a == "--":
                    i += 1
                    break
                if "=" in a and not a.startswith("-") and base == "env":  # env NAME=value
                    i += 1
                    continue
                if a.startswith("-") and len(a) > 1:
                    opt, eq, val = a.partition("=")
                    if base == "env" and opt in ("-S", "--split-string"):
                        line = val if eq else (words[i + 1] if i + 1 < len(words) else None)
                        after = i + 1 if eq else i + 2
                        if line is None:
                            return len(words), chdir, fed
                        # `env -S 'git add .'`: the string is split into the command's words
                        words[i:after] = list(line.split())
                        continue
                    if base == "env" and opt in ("-C", "--chdir"):
                        d = val if eq else (words[i + 1] if i + 1 < len(words) else None)
                        chdir = d if chdir is None else None
                    if not eq and opt in value_opts:
                        i += 2
                    else:
                        i += 1
                    continue
                if positional and (base != "timeout" or _DURATION.fullmatch(a)):
                    positional -= 1
                    i += 1
                    continue
                break
        return i, chdir, fed

    def command(self, n: tree_sitter.Node, st: _State) -> None:
        self.substitutions(n, st)
        words = self.words(n)
        if not words:
            return
        if words[0] == "coproc":
            self.background(n)
            words = words[1:]
            if not words:
                return
        i, chdir, fed = self._unwrap(words)
        prog_words = words[i:]
        if prog_words and prog_words[0] == "!":  # `time ! check`
            self.negation(n)
            prog_words = prog_words[1:]
        name = prog_words[0] if prog_words else None
        base = os.path.basename(name) if name else None
        gst = st
        if chdir is not None and st.base is not None:
            gst = st.inner()
            gst.base = os.path.normpath(os.path.join(st.base, chdir))
        elif chdir is not None:
            gst = st.inner()
            gst.base = None
        if base == "git":
            sub: str | None = None
            j = 1
            while j < len(prog_words):
                w = prog_words[j]
                if w is None or not w.startswith("-"):
                    sub = w
                    break
                j += 2 if w in _GIT_VALUE_OPTS else 1
            self.out.programs.append(None if sub is None else f"git {sub}")
        else:
            self.out.programs.append(base)
        # nested shells
        if base in SHELL_NAMES or base in PWSH_NAMES:
            flags = [w for w in prog_words[1:] if w is not None and w.startswith("-")]
            runs_c = any(
                (not f.startswith("--") and "c" in f[1:])
                or (base in PWSH_NAMES and f.lower() in ("-command", "-c", "-encodedcommand"))
                for f in flags
            )
            from_stdin = (
                not runs_c
                and base in SHELL_NAMES
                and self._script_operand(prog_words) is None
                and not {"--version", "--help"} & set(prog_words)
            )
            if runs_c or from_stdin:
                self.limit(
                    "nested-shell",
                    n,
                    f"`{base} {'-c …' if runs_c else '< script'}` runs its script under its own options, without "
                    "the prologue's pipefail, so a failure inside it may not reach its status",
                    "put the script's commands directly in the command, or start it with `set -e -o pipefail`",
                )
        if base == "trap":
            args = [w for w in prog_words[1:] if w != "--"]
            if len(args) >= 2:
                action = args[0]
                signals = {str(w).upper().removeprefix("SIG") for w in args[1:] if w is not None}
                exits = action is None or re.search(r"\bexit\b(?!\s+\"?\$(\?|\{\?\}))", action)
                if exits and signals & {"EXIT", "0", "ERR"}:
                    self.limit(
                        "trap",
                        n,
                        "an EXIT/ERR trap that runs `exit` replaces the status the command would have ended with",
                        "drop the `exit` from the trap (let the command's own status through), or `exit $?` in it",
                    )
        if base in ("unsetopt", "setopt", "shopt"):
            self._shell_options(n, base, prog_words[1:])
        if base == "set":
            self._set_options(n, prog_words[1:])
        if base in ("cd", "pushd"):
            args = [w for w in prog_words[1:] if not (w or "").startswith("-") or w == "-"]
            if len(args) == 1 and args[0] is not None and args[0] != "-" and st.base is not None:
                st.base = os.path.normpath(os.path.join(st.base, args[0]))
            else:
                st.base = None
                self.out.unresolved_dir = True
            return
        if base in ("popd",):
            st.base = None
            return
        if base == "git":
            self.git(n, prog_words, gst, fed=fed)
        elif name is None and len(prog_words) > 1 and prog_words[1] in _GIT_WRITES:
            # `$VCS commit …`: a program this reading cannot name, run as `commit` / `add`. It may be
            # git, so it gets git's pre-flight (read-only; outside a repository it reads nothing more).
            self.git(n, prog_words, gst, fed=fed)
        self.nested_script(n, base, prog_words, gst, stdin=self._herestring(n) or self._stdin)
        if base == "find":
            self._find_exec(n, prog_words, gst)
        if not st.background and not st.expanded and st.base is not None:
            for c in n.children:
                if c.type in ("command_name", "variable_assignment", "comment") or not c.is_named:
                    continue
                if c.type.endswith("redirect"):
                    continue
                v = static_word(self.src, c)
                if v is None or v == "" or v.startswith("-") or "\x00" in v:
                    continue
                if len(self.out.paths) < limits.SHELL_WRITTEN_MAX_CANDIDATES:
                    self.out.paths.append(PathRef(v, st.base))

    def _script_operand(self, words: list[str | None]) -> str | None:
        """The script file a shell is given (``bash build.sh``), '' when unknown, None when none
        (it reads its script from standard input)."""
        j = 1
        while j < len(words):
            w = words[j]
            if w is None:
                return ""
            if w in ("-o", "+o", "-O", "+O"):
                j += 2
                continue
            if w == "--":
                return words[j + 1] or "" if j + 1 < len(words) else None
            if not w.startswith(("-", "+")):
                return w
            j += 1
        return None

    def _herestring(self, n: tree_sitter.Node) -> str | None:
        for c in n.children:
            if c.type == "herestring_redirect":
                for cc in c.named_children:
                    v = static_word(self.src, cc)
                    if v is not None:
                        return v
        return None

    def _set_options(self, n: tree_sitter.Node, args: list[str | None]) -> None:
        turned_off: list[str] = []
        for j, a in enumerate(args):
            if a is None or len(a) < 2 or a[0] not in "+-":
                continue
            flags = a[1:]
            value = args[j + 1] if j + 1 < len(args) else None
            opt = value.lower().replace("_", "") if value else ""
            negated = opt.startswith("no") and opt[2:] in ("pipefail", "errexit")
            if negated:
                opt = opt[2:]
            if a[0] == "+" and "e" in flags:
                turned_off.append("errexit")
            if "o" in flags and opt in ("pipefail", "errexit") and (a[0] == "+") != negated:
                turned_off.append(opt)
        if turned_off:
            self.limit(
                "set+e",
                n,
                f"`{_snippet(self.src, n)}` turns {' and '.join(turned_off)} back off, undoing the prologue "
                "the exit status relies on",
                "remove it; if one command may fail, handle that command explicitly",
            )

    def _shell_options(self, n: tree_sitter.Node, name: str, args: list[str | None]) -> None:
        """zsh `unsetopt pipefail` / `setopt no_err_exit`, bash `shopt -u -o pipefail`."""
        off: list[str] = []
        unsetting = name == "unsetopt" or (name == "shopt" and any(a and a.startswith("-") and "u" in a for a in args))
        for a in args:
            if a is None or a.startswith("-"):
                continue
            opt = a.lower().replace("_", "")
            negated = opt.startswith("no") and opt[2:] in ("pipefail", "errexit")
            if negated:
                opt = opt[2:]
            if opt in ("pipefail", "errexit") and unsetting != negated:
                off.append(opt)
        if off:
            self.limit(
                "set+e",
                n,
                f"`{_snippet(self.src, n)}` turns {' and '.join(off)} back off, undoing the prologue the exit "
                "status relies on",
                "remove it; if one command may fail, handle that command explicitly",
            )

    def nested_script(
        self, n: tree_sitter.Node, base: str | None, words: list[str | None], st: _State, *, stdin: str | None
    ) -> None:
        """A literal script another program runs: `eval '…'` (read whole: it runs in this very shell,
        under its options), and for its git statements only, `bash -c '…'` / `sh -lc '…'` / a shell
        fed a here-document or here-string, `su -c '…'`, `flock -c '…'`, and a one-word command line
        such as `watch 'git add .'`."""
        script: str | None = None
        if base == "eval":
            args = words[1:]
            script = None if not args or any(a is None for a in args) else " ".join(a for a in args if a is not None)
        elif base in SHELL_NAMES:
            rest = words[1:]
            j = 0
            while j < len(rest):
                w = rest[j]
                if w is None:
                    return
                if w.startswith("-") and not w.startswith("--") and "c" in w[1:]:
                    script = rest[j + 1] if j + 1 < len(rest) else None
                    break
                if w in ("-o", "+o", "-O", "+O"):  # an option that takes the next word: -o pipefail
                    j += 2
                    continue
                if not w.startswith("-") and not w.startswith("+"):
                    return  # a script file, not -c
                j += 1
            else:
                script = stdin
        elif base in ("su", "runuser", "flock"):
            for j, w in enumerate(words[1:-1], start=1):
                if w in ("-c", "--command"):
                    script = words[j + 1]
                    break
        elif base is not None and any(ch in base for ch in " \t\n") and len(words) == 1:
            script = words[0]  # `watch 'git add .'`, `env -S 'git add .'`: the word is a command line
        if not script or self.depth >= _NESTED_MAX_DEPTH:
            return
        inner = _Walker(script.encode("utf-8", "surrogateescape"), self.policy, self.interpreter)
        inner.depth = self.depth + 1
        same_shell = base == "eval"
        inner.vars = dict(self.vars) if same_shell else {}
        root = _parser().parse(inner.src).root_node
        inner.sequence(inner.children_as_sequence(root, set()), _State("" if same_shell else "."))
        if same_shell:
            for lim in inner.out.limitations:
                self.out.limitations.append(
                    Limitation(lim.construct, f"inside eval: {lim.text}", lim.remedy, _where(n), lim.snippet)
                )
            self.out.backgrounded = self.out.backgrounded or inner.out.backgrounded
            self.vars.update(inner.vars)
        for call in inner.out.git:
            if st.base is None or call.directory is None:
                directory = None
            else:
                directory = os.path.normpath(os.path.join(st.base, call.directory))
            self.out.git.append(GitCall(call.sub, call.args, directory, call.text))

    def _find_exec(self, n: tree_sitter.Node, words: list[str | None], st: _State) -> None:
        """`find … -exec git add {} +`: the command find runs for what it finds."""
        j = 1
        while j < len(words):
            if words[j] in ("-exec", "-execdir", "-ok", "-okdir"):
                k = j + 1
                while k < len(words) and words[k] not in (";", "+"):
                    k += 1
                inner = words[j + 1 : k]
                if inner and inner[0] is not None and os.path.basename(inner[0]) == "git":
                    self.git(n, inner, st, fed=True)
                j = k
            j += 1

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


_NESTED_MAX_DEPTH = 4
_CASE_SKIP = frozenset({"word", "concatenation", "string", "raw_string", "extglob_pattern", "simple_expansion"})


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


# -- PowerShell: a lexical reading -------------------------------------------------------------

_PWSH_ALIASES = frozenset(
    {
        "%",
        "?",
        "foreach",
        "foreach-object",
        "where",
        "where-object",
        "select",
        "sort",
        "group",
        "measure",
        "tee",
        "out-null",
        "out-file",
        "out-string",
        "echo",
        "write",
        "ft",
        "fl",
        "gc",
        "gci",
        "ls",
        "dir",
        "cat",
        "sls",
        "select-string",
    }
)


def _pwsh_split(text: str, seps: tuple[str, ...]) -> list[tuple[str, int, str | None]]:
    """Split outside quotes, braces and parentheses. Returns (part, offset, separator-after)."""
    out: list[tuple[str, int, str | None]] = []
    depth = 0
    quote: str | None = None
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "`" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c == "`":
            i += 2
            continue
        elif c == "#" and depth == 0:
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth = max(0, depth - 1)
        elif depth == 0:
            for s in seps:
                if text.startswith(s, i):
                    out.append((text[start:i], start, s))
                    i += len(s)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    out.append((text[start:], start, None))
    return out


def _pwsh_is_native(stage: str) -> bool:
    s = stage.strip()
    if not s:
        return False
    if s.startswith("&") or s.startswith("."):
        return True
    first = s.split()[0]
    if first[0] in "$([@{'\"":
        return False
    low = first.lower()
    if low in _PWSH_ALIASES or re.fullmatch(r"[a-z]+-[a-z][a-z0-9]*", low):
        return False
    return True


def analyze_pwsh(command: str) -> Analysis:
    out = Analysis()

    def pos(off: int) -> str:
        line = command.count("\n", 0, off) + 1
        col = off - (command.rfind("\n", 0, off) + 1) + 1
        return f"{line}:{col}"

    for stmt, off, _sep in _pwsh_split(command, ("\n", ";")):
        if not stmt.strip():
            continue
        out.statements.append(" ".join(stmt.split())[:200])
        chain = _pwsh_split(stmt, ("||", "&&"))
        for part, poff, sep in chain:
            if sep == "||":
                out.limitations.append(
                    Limitation(
                        "or-fallback",
                        "a `||` fallback runs when the command before it fails and replaces the failure",
                        "drop the `|| …` fallback, or end it with `exit 1`",
                        pos(off + poff),
                        " ".join(stmt.split())[:80],
                    )
                )
            stages = [s for s in _pwsh_split(part, ("|",)) if s[2] != "||"]
            natives = [s for s in stages if _pwsh_is_native(s[0])]
            if len(stages) > 1 and len(natives) >= 2:
                out.limitations.append(
                    Limitation(
                        "pwsh-native-pipe",
                        "one native command piped into another leaves $LASTEXITCODE holding the second one's "
                        "code alone",
                        "run the first native command on its own and check $LASTEXITCODE before piping its output",
                        pos(off + poff + natives[0][1]),
                        " ".join(part.split())[:80],
                    )
                )
    return out

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
# Programs that run the rest of their arguments as a command.
WRAPPERS = frozenset(
    {
        "env",
        "sudo",
        "doas",
        "nice",
        "ionice",
        "nohup",
        "timeout",
        "time",
        "xargs",
        "exec",
        "command",
        "builtin",
        "stdbuf",
        "setsid",
        "chrt",
        "taskset",
        "flock",
        "unbuffer",
        "watch",
        "strace",
        "ltrace",
        "caffeinate",
    }
)
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
_WRAPPER_VALUE_OPTS = frozenset(
    {"-u", "-g", "-n", "-s", "-k", "-I", "-P", "-L", "-C", "-E", "-h", "-p", "-r", "-t", "-U", "-D", "-o", "-e"}
)
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


class _Walker:
    def __init__(self, src: bytes, policy: str, interpreter: str) -> None:
        self.src = src
        self.policy = policy
        self.interpreter = interpreter
        self.out = Analysis()
        self._seen: set[tuple[str, int]] = set()
        # Variables the command assigns a literal value (`GIT=/usr/bin/git`), so `$GIT commit` reads
        # as the git it is. Over-approximated (an assignment in a branch counts everywhere after it):
        # the only use is finding a git commit / git add to inspect.
        self.vars: dict[str, str] = {}
        self.depth = 0

    def limit(self, construct: str, node: tree_sitter.Node, text: str, remedy: str) -> None:
        key = (construct, node.start_byte)
        if key in self._seen:
            return
        self._seen.add(key)
        self.out.limitations.append(Limitation(construct, text, remedy, _where(node), _snippet(self.src, node)))

    # A sequence of statements: program, compound_statement, do_group, subshell, then/else bodies.
    def sequence(self, nodes: list[tuple[tree_sitter.Node, bool]], st: _State) -> None:
        """nodes: (statement, backgrounded) in order."""
        real = [(n, bg) for n, bg in nodes]
        for i, (n, bg) in enumerate(real):
            last = i == len(real) - 1
            if bg:
                self.out.backgrounded = True
                self.limit(
                    "background",
                    n,
                    "a command started with `&` is never waited for, so its exit status reaches nothing",
                    "run it in the foreground, or `wait` for it and check its status",
                )
                self.statement(n, _State(st.base, background=True), final=False)
                continue
            self.statement(n, st, final=last)

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
                self.statement(c, _State(st.base, st.background), final=final)
        elif t == "negated_command":
            self.limit(
                "negation",
                n,
                "`!` inverts the status (a failure becomes success) and is exempt from `set -e`",
                "drop the `!` and test the command's status directly",
            )
            for c in n.named_children:
                self.statement(c, _State(st.base, st.background), final=False)
        elif t == "redirected_statement":
            body = n.child_by_field_name("body") or (n.named_children[0] if n.named_children else None)
            if body is not None:
                self.statement(body, st, final=final)
        elif t == "command":
            self.command(n, st)
        elif t == "subshell":
            inner = _State(st.base, st.background)
            self.sequence(self.children_as_sequence(n, set()), inner)
        elif t == "compound_statement":
            inner = _State(st.base, st.background)
            self.sequence(self.children_as_sequence(n, set()), inner)
            if inner.base != st.base:
                st.base = inner.base
        elif t == "if_statement":
            self.if_(n, st)
        elif t in LOOP_TYPES:
            self.loop(n, st)
        elif t == "case_statement":
            inner = _State(st.base, st.background)
            for item in n.named_children:
                if item.type == "case_item":
                    self.sequence(
                        [(c, False) for c in item.named_children if c.type not in _CASE_SKIP],
                        _State(st.base, st.background),
                    )
            if inner.base != st.base:
                st.base = None
        elif t == "function_definition":
            body = n.child_by_field_name("body")
            if body is not None:
                self.statement(body, _State(st.base, st.background), final=True)
        elif t == "declaration_command":
            self.substitutions(n)  # `local x=$(check)`: the status is local's
            self.assignments(n)
        elif t in ("variable_assignment", "variable_assignments"):
            self.assignments(n)
        elif t in (
            "test_command",
            "unset_command",
        ):
            pass
        # other node types (arithmetic, ...) hold no command whose status matters here

    def list_(self, n: tree_sitter.Node, st: _State, *, final: bool) -> None:
        kids = [c for c in n.children if c.type != "comment"]
        # list: left op right (left may itself be a list)
        ops = [c for c in kids if c.type in ("&&", "||")]
        operands = [c for c in kids if c.is_named]
        if len(operands) != 2 or len(ops) != 1:
            for c in operands:
                self.statement(c, st, final=False)
            return
        left, right = operands
        op = ops[0].type
        if op == "||":
            if not self._preserves_failure(right):
                self.limit(
                    "or-fallback",
                    n,
                    "a `||` fallback runs when the command before it fails and its own status replaces the "
                    "failure, so the command can exit zero whatever that command did",
                    "drop the `|| …` fallback, or end it with `exit 1` so a failure still fails",
                )
        elif op == "&&" and self.policy == "all" and not final:
            self.limit(
                "and-chain",
                n,
                "under exitPolicy all, a failing command in an `&&` chain before the last statement does not "
                "stop the script (it is exempt from `set -e`), so a later statement decides the status",
                "split the chain into separate statements, or make it the last statement",
            )
        self.statement(left, st, final=False)
        self.statement(right, st, final=final)

    def _preserves_failure(self, node: tree_sitter.Node) -> bool:
        """`a || exit 1`, `a || false`, `a || { echo msg; exit 2; }` keep a failure a failure."""
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
            code = words[1] if len(words) > 1 else None
            return code is not None and code.isdigit() and int(code) != 0
        return False

    def if_(self, n: tree_sitter.Node, st: _State) -> None:
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
                self.sequence(body, _State(st.base, st.background))
            elif c.type == "else_clause":
                self.sequence(self.children_as_sequence(c, set()), _State(st.base, st.background))
            else:
                self.statement(c, _State(st.base, st.background), final=True)
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
        self.statement(c, _State(st.base, st.background), final=False)

    def loop(self, n: tree_sitter.Node, st: _State) -> None:
        before = st.base
        if n.type == "while_statement":
            kw = n.children[0].type if n.children else "while"
            for i, c in enumerate(n.children):
                if n.field_name_for_child(i) == "condition" and c.is_named:
                    self._condition(c, st, f"a `{kw}` condition")
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
            self.sequence(self.children_as_sequence(body, {"do", "done"}), _State(st.base, st.background))
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

    def _program_word(self, node: tree_sitter.Node) -> str | None:
        """A command name: its literal value, or the literal a variable was assigned (`$GIT`)."""
        v = static_word(self.src, node)
        if v is not None:
            return v
        if node.type in ("simple_expansion", "expansion"):
            names = [c for c in node.named_children if c.type == "variable_name"]
            if len(names) == 1 and len(node.named_children) == 1:
                return self.vars.get(_text(self.src, names[0]))
        if node.type == "string" and len(node.named_children) == 1:  # "$GIT"
            return self._program_word(node.named_children[0])
        return None

    def words(self, n: tree_sitter.Node) -> list[str | None]:
        out: list[str | None] = []
        for c in n.children:
            if c.type == "command_name":
                inner = c.named_children[0] if c.named_children else c
                out.append(self._program_word(inner))
            elif c.is_named and c.type not in ("variable_assignment", "comment") and not c.type.endswith("redirect"):
                if c.type in ("herestring_redirect",):
                    continue
                out.append(static_word(self.src, c))
        return out

    def substitutions(self, n: tree_sitter.Node) -> None:
        """A command or process substitution inside a command's words (or a declaration such as
        `local x=$(…)`) runs a command whose status is discarded: `echo "$(cargo test)"` exits zero
        whatever the tests did. A bare assignment `x=$(…)` keeps the status and is not walked here."""
        stack = list(n.children)
        while stack:
            c = stack.pop()
            if c.type in ("command_substitution", "process_substitution"):
                what = "command substitution `$(…)`" if c.type == "command_substitution" else "process substitution"
                self.limit(
                    "substitution",
                    c,
                    f"a {what} inside a command's arguments runs a command whose exit status is discarded, so "
                    "the command can exit zero whatever that command did",
                    "run the check as its own statement (or assign it alone, `out=$(…)`, which keeps its status) "
                    "and use its output afterwards",
                )
                continue
            stack.extend(c.children)

    def command(self, n: tree_sitter.Node, st: _State) -> None:
        self.substitutions(n)
        words = self.words(n)
        if not words:
            return
        # Skip wrappers (env, sudo, timeout 10, nice -n 5, ...) to the program they run.
        i = 0
        prog_words = words
        while i < len(words):
            w = words[i]
            if w is None:
                break
            base = os.path.basename(w)
            if i > 0 and (w.startswith("-") or "=" in w or re.fullmatch(r"[0-9.]+[smhd]?", w)):
                # an option of the wrapper that takes a value (sudo -u USER, nice -n 5, timeout -s KILL, ...)
                i += 2 if w in _WRAPPER_VALUE_OPTS else 1
                continue
            if base in WRAPPERS:
                i += 1
                continue
            break
        prog_words = words[i:]
        name = prog_words[0] if prog_words else None
        base = os.path.basename(name) if name else None
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
            if runs_c:
                self.limit(
                    "nested-shell",
                    n,
                    f"`{base} -c …` runs its script under its own options, without the prologue's pipefail, so a "
                    "failure inside it may not reach its status",
                    "put the script's commands directly in the command, or start it with `set -e -o pipefail`",
                )
        if name == "trap" and len(words) >= 3:
            action = words[1]
            signals = {str(w).upper().removeprefix("SIG") for w in words[2:] if w is not None}
            if (action is None or re.search(r"\bexit\b(?!\s+\"?\$\?)", action)) and signals & {"EXIT", "0", "ERR"}:
                self.limit(
                    "trap",
                    n,
                    "an EXIT/ERR trap that runs `exit` replaces the status the command would have ended with",
                    "drop the `exit` from the trap (let the command's own status through), or `exit $?` in it",
                )
        if name in ("unsetopt", "setopt", "shopt"):
            self._shell_options(n, name, words[1:])
        if name == "set":
            args = words[1:]
            for j, a in enumerate(args):
                if a is None or not a.startswith("+") or len(a) < 2:
                    continue
                flags = a[1:]
                turned_off: list[str] = []
                if "e" in flags:
                    turned_off.append("errexit")
                if "o" in flags and j + 1 < len(args) and args[j + 1] in ("pipefail", "errexit"):
                    turned_off.append(str(args[j + 1]))
                if turned_off:
                    self.limit(
                        "set+e",
                        n,
                        f"`{_snippet(self.src, n)}` turns {' and '.join(turned_off)} back off, undoing the prologue "
                        "the exit status relies on",
                        "remove it; if one command may fail, handle that command explicitly",
                    )
        if name in ("cd", "pushd"):
            args = [w for w in words[1:] if not (w or "").startswith("-") or w == "-"]
            if len(args) == 1 and args[0] is not None and args[0] != "-" and st.base is not None:
                st.base = os.path.normpath(os.path.join(st.base, args[0]))
            else:
                st.base = None
                self.out.unresolved_dir = True
            return
        if name in ("popd",):
            st.base = None
            return
        if base == "git":
            self.git(n, prog_words, st)
        elif name is None and len(prog_words) > 1 and prog_words[1] in ("commit", "add"):
            # `$VCS commit …`: a program this reading cannot name, run as `commit` / `add`. It may be
            # git, so it gets git's pre-flight (read-only; outside a repository it reads nothing more).
            self.git(n, prog_words, st)
        self.nested_git(n, base, prog_words, st)
        if not st.background and st.base is not None:
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

    def nested_git(self, n: tree_sitter.Node, base: str | None, words: list[str | None], st: _State) -> None:
        """A git commit / git add inside a literal script that another shell (`bash -c '…'`,
        `sh -lc '…'`) or `eval` runs: read that script the same way, for its git statements only."""
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
        if not script or self.depth >= _NESTED_MAX_DEPTH:
            return
        inner = _Walker(script.encode("utf-8", "surrogateescape"), self.policy, self.interpreter)
        inner.depth = self.depth + 1
        inner.vars = dict(self.vars) if base == "eval" else {}
        inner.sequence(inner.children_as_sequence(_parser().parse(inner.src).root_node, set()), _State(""))
        for call in inner.out.git:
            if st.base is None or call.directory is None:
                directory = None
            else:
                directory = os.path.normpath(os.path.join(st.base, call.directory))
            self.out.git.append(GitCall(call.sub, call.args, directory, call.text))

    def git(self, n: tree_sitter.Node, words: list[str | None], st: _State) -> None:
        i = 1
        directory: str | None = st.base
        while i < len(words):
            w = words[i]
            if w is None:
                return  # an expanded option: not a statement this reading can follow
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
        if sub not in ("commit", "add"):
            return
        rest = words[i + 1 :]
        args = None if any(a is None for a in rest) else tuple(a for a in rest if a is not None)
        self.out.git.append(GitCall(sub, args, directory, _snippet(self.src, n, 200)))


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
    w.out.statements = [_snippet(src, n, 200) for n, _ in top]
    w.sequence(top, _State(""))
    return w.out


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

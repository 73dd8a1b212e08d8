"""The walk: statements in order, and which of them decides the status (``final``) — lists,
pipelines, redirections and here-documents, subshells and groups, if / case / loops, functions,
assignments and substitutions. What a construct does to the claim is in ``claims.py``, what a
simple command does in ``commands.py``, the git statements in ``git.py``."""

from __future__ import annotations

import tree_sitter

from zuno.tools.shell.policy import Limitation
from zuno.tools.shell.reading.claims import ClaimRules
from zuno.tools.shell.reading.commands import CommandReading
from zuno.tools.shell.reading.git import GitReading
from zuno.tools.shell.reading.model import Analysis, _State
from zuno.tools.shell.reading.words import _snippet, _text, _where, static_word

LOOP_TYPES = frozenset({"for_statement", "c_style_for_statement", "while_statement"})
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
_CASE_SKIP = frozenset({"word", "concatenation", "string", "raw_string", "extglob_pattern", "simple_expansion"})


class _Walker(CommandReading, GitReading, ClaimRules):
    """Walks a parsed command; one instance per script read (a nested one gets its own)."""

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

    def substitutions(self, n: tree_sitter.Node, st: _State) -> None:
        """A command or process substitution inside a command's words, a redirection, a test, a
        `case` or `for` list, or a declaration such as `local x=$(…)` runs a command whose status is
        discarded: `echo "$(cargo test)"` exits zero whatever the tests did. What it runs is still
        read (a `git add` inside one is still a git add)."""
        for sub in self._outermost_substitutions(n):
            self._discarded(sub)
            self.sequence(self.children_as_sequence(sub, set(_SUB_PUNCT)), st.inner(expanded=True), final=False)

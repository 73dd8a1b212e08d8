"""What each construct does to the claim an exit status makes: a ``||`` fallback, ``!``, a
backgrounded command, an ``&&`` chain under ``all``, a condition, a discarded substitution,
``set +e`` and its zsh/bash spellings. Each records a ``Limitation`` with its remedy.

Mixed into the walker (``walk.py``), whose ``limit``, ``statement`` and ``words`` it uses."""

from __future__ import annotations

import tree_sitter

from zuno.tools.shell.reading.model import _State
from zuno.tools.shell.reading.words import _snippet, _text


class ClaimRules:
    """The constructs that weaken what an exit status proves."""

    def background(self, n: tree_sitter.Node) -> None:
        self.out.backgrounded = True
        self.limit(
            "background",
            n,
            "a command started with `&` (or `coproc`) is never waited for, so its exit status reaches nothing",
            "run it in the foreground, or `wait` for it and check its status",
        )

    def negation(self, n: tree_sitter.Node) -> None:
        self.limit(
            "negation",
            n,
            "`!` inverts the status (a failure becomes success) and is exempt from `set -e`",
            "drop the `!` and test the command's status directly",
        )

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

    def _literal_heredoc(self, redirect: tree_sitter.Node) -> bool:
        for c in redirect.children:
            if c.type == "heredoc_start":
                raw = _text(self.src, c)
                return any(q in raw for q in ("'", '"', "\\"))
        return False

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

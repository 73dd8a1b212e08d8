"""One simple command: its words (a `$NAME` the command assigned reads as its value), the
wrappers skipped to reach the program (env, sudo, timeout, xargs, ...), and what the program
does to the reading: a nested shell, a trap, ``set``, ``cd``, git, ``find -exec``, a literal
script another program runs (``eval``, ``bash -c``), and the paths it names.

Mixed into the walker (``walk.py``)."""

from __future__ import annotations

import os
import re

import tree_sitter

from zuno import limits
from zuno.tools.shell.policy import Limitation
from zuno.tools.shell.reading.git import _GIT_VALUE_OPTS, _GIT_WRITES
from zuno.tools.shell.reading.model import GitCall, PathRef, _State
from zuno.tools.shell.reading.words import PWSH_NAMES, SHELL_NAMES, _parser, _text, _where, static_word

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
_DURATION = re.compile(r"[0-9.]+[smhd]?")
_NESTED_MAX_DEPTH = 4


class CommandReading:
    """Reads one simple command and the programs it runs."""

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
        if len(self.out.invocations) < limits.SHELL_PERMISSION_FORMS_MAX:
            self.out.invocations.append(_text(self.src, n))
            if base is not None:
                self.out.invocations.append(" ".join([base, *(w if w is not None else "?" for w in prog_words[1:])]))
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
        inner = type(self)(script.encode("utf-8", "surrogateescape"), self.policy, self.interpreter)
        inner.depth = self.depth + 1
        same_shell = base == "eval"
        inner.vars = dict(self.vars) if same_shell else {}
        root = _parser().parse(inner.src).root_node
        inner.sequence(inner.children_as_sequence(root, set()), _State("" if same_shell else "."))
        room = limits.SHELL_PERMISSION_FORMS_MAX - len(self.out.invocations)
        self.out.invocations.extend(inner.out.invocations[: max(room, 0)])
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

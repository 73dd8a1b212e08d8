"""What the reading of a command produces (``Analysis``, ``GitCall``, ``PathRef``) and the
walk's position in it (``_State``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from zuno.tools.shell.policy import Limitation

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
    # every simple command as permission patterns see it besides the whole text: as written, and as
    # the program run (no directory, no wrapper: `sudo /bin/rm -f x` is also `rm -f x`; "?" a word
    # only the shell expands), nested scripts (`bash -c '…'`, eval) included
    invocations: list[str] = field(default_factory=list)

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

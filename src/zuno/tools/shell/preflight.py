"""The pre-flight repository read budget: ``git commit`` / ``git add`` are inspected before they run,
so the call can refuse to deliver generated state (Zuno's own ``.zuno/`` files and artifacts).

The inspection makes up to four git reads, and all of them share ONE budget for the whole phase
(``shell.preflight_budget_ms``, 30 s by default): the reads race a deadline that is the budget minus
a small reserve, and the reserve is the time kept to stop a read that never answered. A read that
does not answer in time refuses the call — an unknown repository is not an empty one:

    `git status --porcelain` did not answer within the 30s this command's pre-flight repository
    reads share, so the repository state it depends on is unknown; it was not run

Cancelling the call refuses it the same way. In both cases the abandoned git and anything it
started are stopped as a group (each read runs behind the process layer's guard, in its own
group, tied to Zuno's lifetime) before the refusal returns.

The reads:

1. ``git rev-parse --show-toplevel`` — which repository (none: nothing to inspect; git will say so);
2. ``git status --porcelain -z -- <.zuno>`` — Zuno's state staged, or tracked and modified
   (delivered by ``commit -a`` or a commit naming paths);
3. ``git add --dry-run <the command's own arguments>`` — what each ``git add`` is about to stage.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from zuno import limits
from zuno.declarations import BlockKind
from zuno.process import CommandSpec, RunningCommand, start
from zuno.tool import Refused
from zuno.tools.shell.analysis import GitCall
from zuno.workspace import Workspace

_COMMIT_VALUE_OPTS = frozenset(
    {
        "-m",
        "-F",
        "-c",
        "-C",
        "-t",
        "--author",
        "--date",
        "--file",
        "--message",
        "--template",
        "--reuse-message",
        "--reedit-message",
        "--fixup",
        "--squash",
        "--cleanup",
        "--trailer",
        "--pathspec-from-file",
    }
)
_INTERACTIVE_ADD = frozenset({"-p", "--patch", "-i", "--interactive", "-e", "--edit"})


def _commit_scope(args: tuple[str, ...] | None) -> tuple[bool, list[str]]:
    """(commits tracked modifications from the worktree, pathspecs) of ``git commit ARGS``."""
    if args is None:
        return True, []
    worktree = False
    paths: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            paths.extend(args[i + 1 :])
            break
        if a in _COMMIT_VALUE_OPTS:
            i += 2
            continue
        if a in ("-a", "--all", "-i", "--include", "-o", "--only"):
            worktree = True
        elif a.startswith("--"):
            pass
        elif a.startswith("-") and len(a) > 1:
            for ch in a[1:]:
                if ch == "a":
                    worktree = True
                if ch in "mFcCt":  # takes a value: the rest of the word (or the next word) is it
                    if ch == a[-1]:
                        i += 1
                    break
        else:
            paths.append(a)
        i += 1
    return worktree, paths


def reserve_s(budget_s: float) -> float:
    return min(limits.PREFLIGHT_RESERVE_S, budget_s * limits.PREFLIGHT_RESERVE_FRACTION)


def fmt_s(seconds: float) -> str:
    return f"{seconds:g}s" if seconds >= 1 else f"{seconds * 1000:g}ms"


@dataclass
class PreflightReport:
    reads: list[dict[str, object]] = field(default_factory=list)
    budget_s: float = 0.0
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {"reads": self.reads, "budgetMs": int(self.budget_s * 1000), "elapsedMs": int(self.elapsed_s * 1000)}


class _Reader:
    def __init__(self, env: dict[str, str], log_dir: Path, budget_s: float) -> None:
        self.env = {**env, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"}
        self.log_dir = log_dir
        self.budget_s = budget_s
        self.t0 = time.monotonic()
        self.deadline = self.t0 + budget_s - reserve_s(budget_s)
        self.report = PreflightReport(budget_s=budget_s)

    def refuse_unanswered(self, shown: str) -> Refused:
        return Refused(
            BlockKind.unavailable,
            f"`{shown}` did not answer within the {fmt_s(self.budget_s)} this command's pre-flight repository "
            "reads share, so the repository state it depends on is unknown; it was not run.",
            preflight=self.report.as_dict(),
        )

    async def read(self, argv: list[str], cwd: Path, shown: str) -> tuple[int | None, bytes]:
        if len(self.report.reads) >= limits.PREFLIGHT_MAX_READS:
            raise Refused(
                BlockKind.unavailable,
                f"this command needs more than the {limits.PREFLIGHT_MAX_READS} repository reads its pre-flight "
                f"may make (next: `{shown}`), so the repository state it depends on is unknown; it was not run. "
                "Split the git commands into separate calls.",
                preflight=self.report.as_dict(),
            )
        left = self.deadline - time.monotonic()
        entry: dict[str, object] = {"read": shown}
        self.report.reads.append(entry)
        if left <= 0:
            entry["answered"] = False
            raise self.refuse_unanswered(shown)
        t = time.monotonic()
        starting = asyncio.ensure_future(
            start(CommandSpec(argv=argv, cwd=cwd, env=self.env, log_dir=self.log_dir, label="preflight-git"))
        )
        try:
            try:
                running: RunningCommand = await asyncio.shield(starting)
            except asyncio.CancelledError:
                running = await starting  # never lose the handle of a started read
                raise
            info = await running.wait(timeout=left)
        except asyncio.CancelledError:
            await self._abandon(running)
            entry["answered"] = False
            raise Refused(
                BlockKind.unavailable,
                f"the call was cancelled while `{shown}` (a pre-flight repository read) had not answered, so the "
                "repository state it depends on is unknown; it was not run.",
                preflight=self.report.as_dict(),
                cancelled=True,
            ) from None
        if info is None:
            await self._abandon(running)
            entry["answered"] = False
            self.report.elapsed_s = time.monotonic() - self.t0
            raise self.refuse_unanswered(shown)
        entry["answered"] = True
        entry["ms"] = int((time.monotonic() - t) * 1000)
        entry["exitCode"] = info.returncode
        # git's own children (a hook, a credential helper) must not outlive the read.
        if running.group_alive():
            await running.stop("preflight-done", grace=0.2)
        data = running.read_all()
        await running.close()
        return info.returncode, data

    async def _abandon(self, running: RunningCommand) -> None:
        # Stop the abandoned git and whatever it started, as a group, before the refusal returns.
        # A shielded stop: a second cancellation must not leave the group running.
        stop = asyncio.ensure_future(running.stop("preflight-timeout", grace=0.1))
        try:
            await asyncio.shield(stop)
        except asyncio.CancelledError:
            await stop
        await running.close()


def _realpath(p: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(p))


def _relpath(p: str | os.PathLike[str], start: str | os.PathLike[str]) -> str:
    return os.path.relpath(p, start)


async def preflight(
    calls: list[GitCall],
    *,
    workspace: Workspace,
    workdir: Path,
    env: dict[str, str],
    git: str,
    log_dir: Path,
    budget_s: float,
) -> PreflightReport | None:
    """Inspect the repository before a ``git commit`` / ``git add`` runs. Raises ``Refused`` when a read
    does not answer within the budget, when the call is cancelled, or when Zuno's state would be
    delivered. Returns what it read (None when the command has no such statement)."""
    if not calls:
        return None
    r = _Reader(env, log_dir, budget_s)
    state = _realpath(workspace.state_dir)
    toplevels: dict[str, Path | None] = {}
    statuses: dict[Path, list[tuple[str, str]]] = {}
    offenders: list[str] = []
    for call in calls:
        cwd = workdir if call.directory is None else (_realpath(workdir / call.directory))
        if not cwd.is_dir():
            # The `cd` into it will fail, and unless the script stops there, git runs where it was.
            cwd = workdir
        key = str(cwd)
        if key not in toplevels:
            code, out = await r.read([git, "rev-parse", "--show-toplevel"], cwd, "git rev-parse --show-toplevel")
            top = out.decode("utf-8", "surrogateescape").strip().splitlines()
            toplevels[key] = (_realpath(top[-1])) if code == 0 and top else None
        top_path = toplevels[key]
        if top_path is None or not (state == top_path or state.is_relative_to(top_path)):
            continue  # not a repository, or Zuno's state is not in it: nothing of Zuno's to deliver
        rel = _relpath(state, top_path)
        if top_path not in statuses:
            code, out = await r.read(
                [git, "-C", str(top_path), "status", "--porcelain", "-z", "--untracked-files=no", "--", rel],
                top_path,
                "git status --porcelain",
            )
            entries: list[tuple[str, str]] = []
            if code == 0:
                for rec in out.decode("utf-8", "surrogateescape").split("\0"):
                    if len(rec) > 3 and rec[2] == " ":
                        entries.append((rec[:2], rec[3:]))
            statuses[top_path] = entries
        entries = statuses[top_path]
        staged = [p for xy, p in entries if xy[0] not in (" ", "?", "!")]
        modified = [p for xy, p in entries if xy[1] not in (" ", "?", "!")]
        if call.sub == "commit":
            offenders += [f"{p} (staged)" for p in staged]
            takes_worktree, pathspecs = _commit_scope(call.args)
            if takes_worktree or pathspecs:
                offenders += [f"{p} (modified; committed by this command)" for p in modified]
        else:  # add
            offenders += [f"{p} (already staged)" for p in staged]
            args = call.args
            if args is not None and any(a in _INTERACTIVE_ADD for a in args):
                continue
            dry = [git, "-c", "core.quotepath=off", "add", "--dry-run"]
            argv = [*dry, *(args if args is not None else ("--all", "--", rel))]
            shown = "git add --dry-run " + (" ".join(args) if args is not None else f"--all -- {rel}")
            code, out = await r.read(argv, cwd, shown.strip())
            if code == 0:
                for line in out.decode("utf-8", "surrogateescape").splitlines():
                    if line.startswith("add '") and line.endswith("'"):
                        p = line[5:-1]
                        full = (_realpath(cwd / p)) if not Path(p).is_absolute() else Path(p)
                        # --dry-run prints paths relative to the repository's top level
                        cand = _realpath(top_path / p)
                        if any(x == state or x.is_relative_to(state) for x in (full, cand)):
                            offenders.append(f"{_relpath(cand, top_path)} (about to be staged)")
    r.report.elapsed_s = time.monotonic() - r.t0
    if offenders:
        shown_state = _relpath(state, workdir) if state.is_relative_to(workdir) else str(state)
        listed = ", ".join(sorted(set(offenders))[:10])
        more = f" and {len(set(offenders)) - 10} more" if len(set(offenders)) > 10 else ""
        raise Refused(
            BlockKind.denied,
            f"this command would deliver Zuno's own generated state ({shown_state}/): {listed}{more}; it was not run. "
            f"Zuno's state folder is never committed: unstage it with `git restore --staged -- {shown_state}` (or "
            f"`git rm -r --cached -- {shown_state}` if it is tracked) and leave it out of `git add`.",
            preflight=r.report.as_dict(),
        )
    return r.report

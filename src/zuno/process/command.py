"""What to run, and what came of it: ``CommandSpec``, ``ExitInfo``, ``StopResult`` and the guard's
own exit statuses (125 the guard failed, 126 could not execute, 127 not found).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GUARD_DIAG_PREFIX = "zuno-guard:"
GUARD_CODES = (125, 126, 127)


@dataclass(frozen=True)
class CommandSpec:
    argv: list[str]  # what the guard execs, e.g. ["bash", "-c", script]
    cwd: Path
    env: dict[str, str]  # the FINAL environment (ZUNO_* already withheld by the caller); a guard
    # started directly (no fork-server) is exec'd with it too, so it holds nothing the command lacks
    log_dir: Path  # where the capture log file is created
    label: str = ""


@dataclass(frozen=True)
class ExitInfo:
    returncode: int | None  # None when the command's process was killed by a signal
    signal: int | None  # the signal that killed it, if any
    guard_diagnostic: str | None  # the guard's own line (125/126/127), only from the guard's private pipe
    settled: bool  # False when the status could not be settled (the capture broke)
    killed_by: str | None  # None | "timeout" | "cancel" | "ceiling" | "session-end" | "kill" | ...
    # The guard reported its failure before the command was exec'd (or could not itself be started):
    # provably nothing ran. False when it is not known (the guard died, or a record predates this).
    never_started: bool = False

    @property
    def guard_failed(self) -> bool:
        return self.guard_diagnostic is not None and self.returncode in GUARD_CODES


@dataclass(frozen=True)
class StopResult:
    signalled: bool  # a signal was sent to the group
    group_exited: bool  # the whole group is confirmed gone
    signals: tuple[str, ...] = ()
    message: str = ""

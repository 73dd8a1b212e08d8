"""Interpreters, exitPolicy, the prologue, and the authority a policy starts from.

The prologue is given to the interpreter as command-line options (``bash -o pipefail -c CMD``),
never spliced into the command's text, so the command runs exactly as written and its line
numbers stay its own. What the options are:

=========  ==========================  ===================================================
policy     bash / ksh / zsh            authority before the command's own text is read
=========  ==========================  ===================================================
pipefail   ``-o pipefail``             authoritative
all        ``-e -o pipefail``          authoritative
last       (nothing: POSIX default)    derived
=========  ==========================  ===================================================

dash fails on ``set -o pipefail`` (it exits without running anything), so dash and ``sh`` (whose
name does not say what is behind it) run without it and are always ``derived``, naming the
interpreter. PowerShell has no pipefail: only ``all`` (``$ErrorActionPreference = 'Stop'`` and
``$PSNativeCommandUseErrorActionPreference = $true``) is authoritative there.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

ExitPolicy = Literal["pipefail", "all", "last"]
InterpreterName = Literal["bash", "zsh", "ksh", "dash", "sh", "pwsh"]
INTERPRETERS: tuple[str, ...] = ("bash", "zsh", "ksh", "dash", "sh", "pwsh")

# Interpreters whose `-o pipefail` is known to work.
PIPEFAIL_CAPABLE = frozenset({"bash", "zsh", "ksh"})

PWSH_ALL_PROLOGUE = (
    "$ErrorActionPreference = 'Stop'; $PSNativeCommandUseErrorActionPreference = $true; Set-StrictMode -Off;\n"
)


class Authority(StrEnum):
    authoritative = "authoritative"
    derived = "derived"
    unknown = "unknown"


@dataclass(frozen=True, slots=True)
class Limitation:
    """Why an exit status reaches less far than the policy promised: the construct, where it is,
    what it does to the status, and the remedy."""

    construct: str
    text: str
    remedy: str
    at: str | None = None  # "line:column", 1-based
    snippet: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "construct": self.construct,
            "text": self.text,
            "remedy": self.remedy,
            "at": self.at,
            "snippet": self.snippet,
        }

    def short(self) -> str:
        where = f" at {self.at}" if self.at else ""
        snip = f" `{self.snippet}`" if self.snippet else ""
        return f"{self.construct}{where}{snip}: {self.text}; {self.remedy}"


@dataclass(frozen=True, slots=True)
class Plan:
    """How a command is run under an interpreter and a policy, and what that claims."""

    interpreter: str
    executable: str
    argv: list[str]
    policy: str
    authority: Authority
    limitations: tuple[Limitation, ...]
    prologue: str  # what the options amount to, for the receipt


def find_interpreter(name: str, path: str | None) -> str | None:
    if name == "pwsh":
        return shutil.which("pwsh", path=path) or shutil.which("powershell", path=path)
    return shutil.which(name, path=path)


def installed_interpreters(path: str | None = None) -> list[str]:
    return [n for n in INTERPRETERS if find_interpreter(n, path)]


def plan(interpreter: str, executable: str, policy: str, command: str) -> Plan:
    lims: list[Limitation] = []
    if interpreter == "pwsh":
        base = ["-NoLogo", "-NoProfile", "-NonInteractive", "-Command"]
        if policy == "all":
            return Plan(
                interpreter,
                executable,
                [executable, *base, PWSH_ALL_PROLOGUE + command],
                policy,
                Authority.authoritative,
                (),
                "$ErrorActionPreference = 'Stop'; $PSNativeCommandUseErrorActionPreference = $true",
            )
        lims.append(
            Limitation(
                "interpreter",
                f"PowerShell has no pipefail, so under exitPolicy {policy} a failing command before the last "
                "one does not reach the exit status",
                'use exitPolicy "all", the only authoritative policy on PowerShell',
            )
        )
        return Plan(
            interpreter, executable, [executable, *base, command], policy, Authority.derived, tuple(lims), "(none)"
        )

    if policy == "last":
        lims.append(
            Limitation(
                "exitPolicy",
                "under exitPolicy last only the final stage of a pipeline decides the status (the POSIX default)",
                'use exitPolicy "pipefail" (the default) unless a failing stage is meant to be tolerated',
            )
        )
        return Plan(
            interpreter, executable, [executable, "-c", command], policy, Authority.derived, tuple(lims), "(none)"
        )

    if interpreter in PIPEFAIL_CAPABLE:
        opts = ["-e", "-o", "pipefail"] if policy == "all" else ["-o", "pipefail"]
        prologue = "set -e -o pipefail" if policy == "all" else "set -o pipefail"
        return Plan(
            interpreter,
            executable,
            [executable, *opts, "-c", command],
            policy,
            Authority.authoritative,
            (),
            prologue,
        )

    # dash, sh: no pipefail. Run without it (dash would refuse to run anything), say so.
    why = (
        "dash has no pipefail (it exits without running the command when asked for it)"
        if interpreter == "dash"
        else "sh is treated as unknown: its name does not say which shell is behind it, so pipefail cannot be relied on"
    )
    lims.append(
        Limitation(
            "interpreter",
            f"{why}; it ran without pipefail, so a failing stage before the last one of a pipeline does not "
            f"reach the exit status (interpreter: {interpreter})",
            'use interpreter "bash" (or zsh, ksh) for an authoritative status',
        )
    )
    opts = ["-e"] if policy == "all" else []
    prologue = "set -e" if policy == "all" else "(none)"
    return Plan(
        interpreter,
        executable,
        [executable, *opts, "-c", command],
        policy,
        Authority.derived,
        tuple(lims),
        prologue,
    )

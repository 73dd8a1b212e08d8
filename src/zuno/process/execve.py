"""What ``execve`` accepts: no NUL byte in any string, and Linux's size limits on what it copies.

Checked before a process is started, so a command that could never be exec'd is refused with the
argument at fault named, rather than reported as a failure of the guard (or of the tool):

* every argument and every ``NAME=value`` environment string ends at its first NUL byte, so a NUL
  inside one cannot be passed at all; a name that is empty or holds ``=`` cannot be passed either;
* one string may be at most ``MAX_ARG_STRLEN`` bytes, its terminating NUL included (Linux: 32 pages);
* all strings, their terminators and one pointer each must fit the space the kernel sets aside for
  them: a quarter of the stack limit, at most three quarters of the kernel's 8 MiB ``_STK_LIM``, and
  never less than ``ARG_MAX_FLOOR`` (``fs/exec.c``). The guard's own arguments are counted in
  ``GUARD_RESERVE_BYTES``.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_ARG_STRLEN = 32 * 4096
ARG_MAX_FLOOR = 32 * 4096
_STK_LIM = 8 * 1024 * 1024
POINTER_BYTES = 8
# What a directly started guard adds to the command's argument vector (interpreter, script, fds, cwd).
GUARD_RESERVE_BYTES = 8 * 1024


@dataclass(frozen=True, slots=True)
class ExecProblem:
    """Why an argument vector and environment cannot be exec'd."""

    kind: str  # "nul" | "text" | "string" | "name" | "total"
    index: int | None  # the argv element at fault; None for the environment or the total
    name: str | None  # the environment variable at fault
    size: int  # bytes of the string (nul: the byte offset of the NUL)
    limit: int

    def describe(self, what: str | None = None) -> str:
        """One clause in English; ``what`` names the offending string (default: argument N / $NAME)."""
        if what is None:
            what = f"argument {self.index}" if self.index is not None else f"environment variable {self.name}"
        if self.kind == "nul":
            return (
                f"{what} contains a NUL byte (at byte {self.size}); the operating system ends every argument "
                "and environment string at its first NUL, so it cannot be passed to a program"
            )
        if self.kind == "name":
            why = "is empty" if not self.name else "contains '='"
            return (
                f"the environment variable name {json.dumps(self.name)} {why}: a NAME=value string ends its name "
                "at the first '=', so no program can be given it"
            )
        if self.kind == "text":
            return f"{what} contains a lone surrogate (from a \\ud800-style escape), which is not text"
        if self.kind == "string":
            return (
                f"{what} is {self.size:,} bytes, over the {self.limit - 1:,} bytes one argument or environment "
                "string may have (execve: E2BIG)"
            )
        return (
            f"the arguments and environment together are {self.size:,} bytes, over the {self.limit:,} bytes "
            "execve accepts (E2BIG)"
        )


def arg_space() -> int:
    """The bytes execve may copy for arguments, environment and their pointers, as Linux computes it."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
    limit = _STK_LIM // 4 * 3
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft // 4)
    return max(limit, ARG_MAX_FLOOR)


def _size(value: str) -> int | None:
    """Bytes of ``value`` as the system gets it; None when it cannot be encoded (a lone surrogate)."""
    try:
        return len(os.fsencode(value))
    except UnicodeEncodeError:
        return None


def nul_offset(value: str) -> int | None:
    """The byte offset of the first NUL in ``value`` (as encoded for the system), or None."""
    i = value.find("\0")
    return None if i < 0 else len(value[:i].encode("utf-8", "surrogatepass"))


def _string_problem(value: str, index: int | None, name: str | None) -> tuple[ExecProblem | None, int]:
    at = nul_offset(value)
    if at is not None:
        return ExecProblem("nul", index, name, at, 0), 0
    n = _size(value)
    if n is None:
        return ExecProblem("text", index, name, 0, 0), 0
    if n + 1 > MAX_ARG_STRLEN:
        return ExecProblem("string", index, name, n, MAX_ARG_STRLEN), 0
    return None, n + 1 + POINTER_BYTES


def exec_problem(
    argv: Sequence[str], env: Mapping[str, str], *, reserve: int = GUARD_RESERVE_BYTES
) -> ExecProblem | None:
    """The first reason ``argv`` with ``env`` cannot be exec'd, or None when it can."""
    total = reserve
    for i, arg in enumerate(argv):
        problem, n = _string_problem(arg, i, None)
        if problem is not None:
            return problem
        total += n
    for name, value in env.items():
        if not name or "=" in name:
            return ExecProblem("name", None, name, 0, 0)
        problem, n = _string_problem(f"{name}={value}", None, name)
        if problem is not None:
            return problem
        total += n
    space = arg_space()
    if total > space:
        return ExecProblem("total", None, None, total, space)
    return None

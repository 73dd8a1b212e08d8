"""What execve would refuse, refused before a shell command (or its pre-flight) runs: a NUL byte in
the command, a lone surrogate, a command or environment over execve's size limits. Each refusal
names the field at fault and how to fix it (``zuno.process.execve`` holds the rules)."""

from __future__ import annotations

from zuno.declarations import BlockKind
from zuno.process import exec_problem
from zuno.tool import Refused


def check_exec(command: str, argv: list[str], env: dict[str, str]) -> None:
    """Refuse a command that could never be exec'd (a NUL byte, over execve's size limits), naming
    the field at fault, before anything (the pre-flight included) runs."""
    problem = exec_problem(argv, env)
    if problem is None:
        return
    in_command = problem.index is not None and command in argv[problem.index]
    if problem.kind == "nul" and in_command:
        at = command.find("\0")
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument 'command': contains a NUL byte (at character {at}); the operating system ends every "
            "argument at its first NUL, so no interpreter can be given this command. Remove it "
            "(to produce a NUL byte, write printf '\\0').",
            field="command",
        )
    if problem.kind == "text" and in_command:
        raise Refused(
            BlockKind.invalid_arguments,
            "argument 'command': contains a lone surrogate (from a \\ud800-style escape), which is not text; "
            "send valid Unicode.",
            field="command",
        )
    if problem.kind == "string" and in_command:
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument 'command': {problem.describe('the command')}. Write the script to a file "
            "(with write) and run that file instead.",
            field="command",
            bytes=problem.size,
            limit=problem.limit - 1,
        )
    if problem.kind == "total":
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument 'command': {problem.describe()}: the command is {len(command.encode('utf-8', 'replace')):,} "
            "bytes of that. Write the script to a file (with write) and run that file instead, or "
            "shrink the environment (shell.env, environment hooks).",
            field="command",
            bytes=problem.size,
            limit=problem.limit,
        )
    raise Refused(
        BlockKind.invalid_arguments,
        f"the command's environment cannot be passed to a program: {problem.describe()}. Fix the "
        f"{'name' if problem.kind == 'name' else 'value'} (it comes from Zuno's environment, shell.env or an "
        "environment hook).",
    )

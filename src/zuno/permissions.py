"""Authorization: permission rules, strict mode, and the approval port.

A rule is ``{"tool": name-or-glob, "pattern": optional glob over the call's subject, "action":
"allow" | "ask" | "deny"}``. Among the rules that match a call, deny beats ask beats allow,
whatever their order. With no matching rule the call is allowed. Strict mode follows the spec's
Effect table: SideEffecting needs a fresh approval for every call (an allow rule does not waive
it; a deny rule still denies); ReadOnly needs none; UserMediated is not an approval surface;
Delegating is re-evaluated per child call, not at the delegation.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol

from zuno.config import PermissionConfig, PermissionRule
from zuno.declarations import Declarations, Effect

Action = Literal["allow", "ask", "deny"]
_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str
    rule: PermissionRule | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    session_id: str
    call_id: str
    tool: str
    subject: str | None
    arguments: dict[str, Any]
    declarations: Declarations
    reason: str


class Approver(Protocol):
    async def approve(self, request: ApprovalRequest) -> bool | None:
        """True approves, False declines, None means nobody could answer."""


class NoApprover:
    async def approve(self, request: ApprovalRequest) -> bool | None:
        return None


class AutoApprover:
    async def approve(self, request: ApprovalRequest) -> bool | None:
        return True


class TerminalApprover:
    """Asks on the controlling terminal (the CLI uses it when stdin/stderr are a TTY).

    The answer is read on the event loop, not in a thread: a Ctrl-C (or any cancellation) while
    the question waits ends the wait at once, and nothing is left blocked on the terminal.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def approve(self, request: ApprovalRequest) -> bool | None:
        async with self._lock:
            return await _ask_on_terminal(request)


async def _ask_on_terminal(request: ApprovalRequest) -> bool | None:
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        print("zuno: no terminal to ask for approval on", file=sys.stderr)
        return None
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[bytes | None] = loop.create_future()
    line = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 256)
        except BlockingIOError:
            return
        except OSError:
            chunk = None
        if chunk:
            line.extend(chunk)
        if (not chunk or b"\n" in line) and not answered.done():
            answered.set_result(bytes(line) if chunk is not None else None)

    watching = False
    try:
        from zuno.commands.terminal_markdown import visible_controls  # the model's escapes shown, never obeyed

        subject = f": {' '.join(request.subject.split())}" if request.subject else ""
        asked = visible_controls(f"{request.tool} ({request.declarations.effect}){subject}? {request.reason}")
        prompt = f"\nzuno: approve {asked} [y/N] "
        os.write(fd, prompt.encode("utf-8", "replace"))
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable)
        watching = True
        answer = await answered
    except OSError:
        return None
    finally:
        if watching:
            loop.remove_reader(fd)
        os.close(fd)
    if answer is None:
        return None
    return answer.split(b"\n", 1)[0].strip().lower() in (b"y", b"yes")


# A call's subject: one text (a command, a URL), or the forms of one (a path as given, and the
# location it resolves to, relative to the root and absolute): a rule matches when it matches any
# form, so a pattern cannot be dodged by spelling a path another way ("./secret/a", an absolute
# path, a link to it). Matching more forms can only add matches, and among them deny beats ask
# beats allow: a form more never makes a call less restricted.
Subject = str | tuple[str, ...] | None


# A search reads the files it searches: the rules for read apply to glob and grep as well, to the
# directory a call searches (here) and to every path it finds (tools/search/rules.py), so a read rule
# over ``secret/**`` keeps the names and the lines of the files below ``secret/`` from the model.
SEARCHES_THAT_READ = frozenset({"glob", "grep"})
# The tools whose every call reads files under read's path rules: the searches, and chord's
# view_image (its path is read's subject: a read deny refuses it, a read ask asks before it runs).
READS_UNDER_READ_RULES = SEARCHES_THAT_READ | {"view_image"}


def rule_applies(rule: PermissionRule, tool: str) -> bool:
    """Whether ``rule`` is one of ``tool``'s: its ``tool`` names it, or it is a read rule and ``tool``
    reads under read's rules (``READS_UNDER_READ_RULES``)."""
    return fnmatchcase(tool, rule.tool) or (tool in READS_UNDER_READ_RULES and fnmatchcase("read", rule.tool))


def _refuses_outright(rule: PermissionRule, tool: str) -> bool:
    return rule.action == "deny" and rule.pattern is None and rule_applies(rule, tool)


def denied_outright(config: PermissionConfig, tool: str) -> PermissionRule | None:
    """The deny rule without a pattern that refuses every call of ``tool`` (whatever its subject), or
    None. Such a tool is taken off the tools offered (``Session.visible_tools``, ``zuno mcp``'s
    tools/list) and marked in ``zuno tools``: its own patternless deny, and a patternless ``read``
    deny for the tools that read under read's rules (``READS_UNDER_READ_RULES``: glob, grep,
    view_image), whose every call would be refused naming the rule."""
    return next((r for r in config.rules if _refuses_outright(r, tool)), None)


def _matches(rule: PermissionRule, tool: str, subject: Subject) -> bool:
    if not rule_applies(rule, tool):
        return False
    if rule.pattern is None:
        return True
    if subject is None:
        return False
    if isinstance(subject, str):
        return fnmatchcase(subject, rule.pattern)
    return any(fnmatchcase(form, rule.pattern) for form in subject)


def strictest_rule(config: PermissionConfig, tool: str, subject: Subject) -> PermissionRule | None:
    """The rule that decides among those matching (deny, then ask, then allow), or None."""
    matching = [r for r in config.rules if _matches(r, tool, subject)]
    return max(matching, key=lambda r: _RANK[r.action], default=None)


def describe_rule(rule: PermissionRule) -> str:
    """A rule as the user wrote it in the config: JSON, not a Python rendering."""
    return json.dumps(rule.model_dump(exclude_none=True), ensure_ascii=False)


def decide(config: PermissionConfig, tool: str, subject: Subject, decl: Declarations) -> Decision:
    best = strictest_rule(config, tool, subject)
    if best is not None and best.action == "deny":
        return Decision("deny", f"denied by permission rule {describe_rule(best)}", best)
    if config.strict and decl.effect is Effect.SideEffecting:
        return Decision("ask", "strict mode: a SideEffecting call needs a fresh approval", best)
    if best is not None and best.action == "ask":
        return Decision("ask", f"permission rule {describe_rule(best)} asks for approval", best)
    if best is not None:
        return Decision("allow", f"allowed by permission rule {describe_rule(best)}", best)
    return Decision("allow", "no permission rule matched")

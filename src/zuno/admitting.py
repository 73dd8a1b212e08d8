"""Admitting one call, in the model's order: resolve -> validate -> classify -> hooks -> permission.

A call is either ``Admitted`` (its tool, validated arguments and declarations, ready to run) or
``Blocked`` (the kind of refusal and a message that names the problem and the fix). Nothing of a
call runs here; the approval a permission rule asks for is the only thing recorded (an
``approval`` event). The words and bounds it uses are ``zuno.admission``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import ValidationError

from zuno import limits
from zuno.admission import (
    as_text,
    available_list,
    describe_validation,
    lone_surrogate,
    measure_call,
    plain_call,
    sentence,
    suggest_tool,
)
from zuno.config import Config, json_type_name
from zuno.declarations import STRICT, BlockKind, Declarations
from zuno.hooks import applies, run_hook
from zuno.permissions import ApprovalRequest, Approver, Decision, decide
from zuno.step_state import StepState
from zuno.store import Store
from zuno.store.calls import CallEntry
from zuno.surface import Surface
from zuno.tool import Tool, ToolArgs
from zuno.workspace import Workspace

CROSS_CUTTING = ("intent", "accept_large_output")


@dataclass
class Admitted:
    """A call that passed admission, ready to run; ``entry`` is its durable row once its run is
    opened (numbered, its intent committed if it is a Never call)."""

    idx: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    tool: Tool
    args: ToolArgs
    decl: Declarations
    accept_large_output: bool
    entry: CallEntry | None = None
    approved: frozenset[str] = frozenset()  # the subject forms an approval was given for


@dataclass
class Blocked:
    """A refused call: nothing of it runs; it settles as ``blocked`` with its kind and message."""

    idx: int
    call_id: str
    name: str
    arguments: Any
    decl: Declarations
    kind: BlockKind
    message: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, eq=False)
class Admission:
    """Admits the calls of one session's steps: the tools of its surface, its config's hooks and
    permission rules, and its approver for the calls a rule asks about."""

    session_id: str
    workspace: Workspace
    store: Store
    config: Config
    surface: Surface
    approver: Approver

    async def admit(self, st: StepState, idx: int, raw: Any) -> Admitted | Blocked:
        step = st.n
        # The usual call (an object of ASCII strings and scalars, its arguments one object of them)
        # is known to be within bounds and valid Unicode in one pass; any other is measured in full.
        plain = plain_call(raw)
        too_big = None if plain else measure_call(raw)
        if too_big is not None:
            # Nothing of the call is read (its id and name could be nested too) or recorded as sent.
            name = raw.get("name") if isinstance(raw, dict) else None
            name = as_text(name) if isinstance(name, str) and len(name) <= 256 else ""
            return Blocked(
                idx,
                f"call_{step:04d}_{idx:02d}",
                name,
                {"withheld": too_big},
                STRICT,
                BlockKind.invalid_arguments,
                too_big + ".",
            )
        if not isinstance(raw, dict):
            return Blocked(
                idx,
                f"call_{step:04d}_{idx:02d}",
                "",
                raw,
                STRICT,
                BlockKind.invalid_arguments,
                'a call must be a JSON object with "name" and "arguments".',
            )
        call_id = str(raw.get("id") or f"call_{step:04d}_{idx:02d}")
        name = raw.get("name")
        if not plain:
            call_id = as_text(call_id)
            if isinstance(name, str):
                name = as_text(name)
        arguments: Any = raw.get("arguments", {})
        plain = plain and isinstance(arguments, dict)  # (arguments sent as a JSON string are parsed below)
        if not isinstance(name, str) or not name:
            return Blocked(
                idx,
                call_id,
                str(name or ""),
                arguments,
                STRICT,
                BlockKind.invalid_arguments,
                'the call has no tool "name"; name one of: ' + available_list(self.surface.names()) + ".",
            )

        def refuse(kind: BlockKind, message: str, decl: Declarations = STRICT) -> Blocked:
            return Blocked(idx, call_id, name, arguments, decl, kind, message)

        # 1. resolve
        tool = self.surface.tools.get(name)
        if tool is not None and name in st.hidden:
            offered = [n for n in self.surface.names() if n not in st.hidden]
            return refuse(
                BlockKind.unavailable,
                f"tool {name!r} is not offered now: {st.hidden[name]}. Available: " + available_list(offered) + ".",
            )
        if tool is None:
            why = self.surface.disabled.get(name)
            if len(name) > limits.UNKNOWN_TOOL_NAME_SHOWN_MAX:  # never echo megabytes of a name
                name = f"{name[: limits.MCP_TOOL_NAME_MAX]}... ({len(name):,} characters)"
            msg = (
                f"tool {name!r} is not available: {why}."
                if why
                else f"tool {name!r} is not available in profile {self.surface.profile!r}."
            )
            meant = suggest_tool(name, self.surface.names())
            if meant is not None:
                msg += f" Did you mean {meant!r}?"
            msg += " Available: " + available_list(self.surface.names()) + "."
            return refuse(BlockKind.unavailable, msg)
        # 2. validate
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                return refuse(
                    BlockKind.invalid_arguments,
                    f"arguments for {name} are not valid JSON ({e.msg} at column {e.colno}); send a JSON object.",
                )
            except RecursionError:
                arguments = {"withheld": "nested too deeply to read"}
                return refuse(
                    BlockKind.invalid_arguments,
                    f"arguments for {name} are nested too deeply to read; send flat arguments.",
                )
            if isinstance(arguments, str) and arguments.lstrip().startswith("{"):
                # Encoded twice (some open models send the object's JSON as a JSON string): the
                # object is unambiguous, so it is read rather than refused.
                with contextlib.suppress(json.JSONDecodeError, RecursionError):
                    arguments = json.loads(arguments)
            # Parsed, the usual arguments (ASCII strings and scalars, an object or two deep) are
            # within bounds and valid Unicode as they stand; any others are measured in full.
            plain = plain_call(arguments)
            too_big = None if plain else measure_call(arguments)
            if too_big is not None:
                arguments = {"withheld": too_big}
                return refuse(BlockKind.invalid_arguments, f"arguments for {name}: {too_big}.")
        if not isinstance(arguments, dict):
            return refuse(
                BlockKind.invalid_arguments,
                f"arguments for {name} must be a JSON object, not {json_type_name(arguments)}.",
            )
        bad = None if plain else lone_surrogate(arguments)
        if bad is not None:
            return refuse(
                BlockKind.invalid_arguments,
                f"argument '{bad}' is not valid Unicode text (it holds a lone surrogate, such as a \\ud800 escape "
                "with no pair); send valid UTF-8.",
            )
        rest = {k: v for k, v in arguments.items() if k not in CROSS_CUTTING}
        intent = arguments.get("intent")
        accept_large = arguments.get("accept_large_output", False)
        if intent is not None and not isinstance(intent, str):
            return refuse(
                BlockKind.invalid_arguments, "argument 'intent' must be a string (a UI label); fix or drop it."
            )
        if not isinstance(accept_large, bool):
            return refuse(BlockKind.invalid_arguments, "argument 'accept_large_output' must be true or false.")
        try:
            args = tool.Args.model_validate(rest)
        except ValidationError as e:
            why = describe_validation(tool, e)
            advice = tool.invalid_arguments_advice(rest)
            return refuse(
                BlockKind.invalid_arguments, why + (f" {advice}" if advice else ""), decl=tool.declarations
            )
        # 3. classify
        decl = tool.classify(args)
        # 4. hooks
        payload: dict[str, Any] | None = None
        for hook in self.config.hooks.pre_dispatch:
            if applies(hook, name):
                if payload is None:
                    payload = {
                        "session": self.session_id,
                        "call_id": call_id,
                        "tool": name,
                        "arguments": arguments,
                        "declarations": decl.as_dict(),
                    }
                verdict = await run_hook(hook, payload, self.workspace.root)
                if not verdict.allowed:
                    return refuse(BlockKind.denied, sentence(verdict.reason), decl=decl)
        # 5. permission: on the subject as given and, for a path, where it resolves now (the tool
        # checks the location again when it resolves it: ToolContext.check_location)
        subject = tool.subject(args)
        forms = subject_forms(self.config, self.workspace, tool, args)
        decision = decide(self.config.permission, name, forms or subject, decl)
        if decision.action == "deny":
            return refuse(BlockKind.denied, decision.reason + _matched_as(decision, subject, forms) + ".", decl=decl)
        if decision.action == "ask":
            answer = await self._ask(
                st, ApprovalRequest(self.session_id, call_id, name, subject, arguments, decl, decision.reason)
            )
            self.store.add_event(
                self.session_id,
                "approval",
                {"tool": name, "reason": decision.reason, "answer": answer},
                step=step,
                call_id=call_id,
            )
            if answer == "cancelled":
                return refuse(
                    BlockKind.denied,
                    f"approval was needed ({decision.reason}) and the step was cancelled before an answer "
                    "came; nothing ran.",
                    decl=decl,
                )
            if answer is None:
                return refuse(
                    BlockKind.denied,
                    f"approval was needed ({decision.reason}) and nobody could give it: no approver is "
                    "attached. Run on a terminal to be asked, or pass --approve.",
                    decl=decl,
                )
            if answer is False:
                return refuse(BlockKind.denied, f"approval was needed ({decision.reason}) and was declined.", decl=decl)
            return Admitted(idx, call_id, name, arguments, tool, args, decl, accept_large, approved=frozenset(forms))
        return Admitted(idx, call_id, name, arguments, tool, args, decl, accept_large)

    async def _ask(self, st: StepState, request: ApprovalRequest) -> bool | Literal["cancelled"] | None:
        """The approver's answer; "cancelled" when the step was cancelled first (then nobody is
        asked, or the question is withdrawn), which is a refusal like any answer but yes."""
        if st.cancel_requested:
            return "cancelled"
        st.asking = asyncio.ensure_future(self.approver.approve(request))
        try:
            return await st.asking
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the step's own task was cancelled from outside: that is not ours to settle
            return "cancelled"
        finally:
            st.asking = None


def subject_forms(config: Config, workspace: Workspace, tool: Tool, args: ToolArgs) -> tuple[str, ...]:
    """What permission patterns match for a call (``Tool.subject_forms``); empty with no permission
    rules (nothing to match)."""
    return tool.subject_forms(args, workspace) if config.permission.rules else ()


def _matched_as(decision: Decision, subject: str | None, forms: tuple[str, ...]) -> str:
    """ " (matched as 'secret/a')" when the deciding rule matched a form of the subject other than its
    text: where a path resolves, one simple command of a shell command."""
    rule = decision.rule
    if rule is None or rule.pattern is None:
        return ""
    form = next((f for f in forms if f != subject and fnmatchcase(f, rule.pattern)), None)
    return f" (matched as {form!r})" if form is not None else ""

"""Admission's words and bounds: how a refused call is described to the model (JSON and English,
never Python reprs; every message a whole sentence), how deep and large a call may be
(``limits.CALL_MAX_DEPTH``, ``CALL_MAX_BYTES``), measured without recursion, and which of its text
is not valid Unicode (a lone surrogate). The checks themselves run in ``zuno.admitting``.

An action union's refusal names the action and the fields that action takes (its wire schema
merges every action's fields into one object, so "known" is said per action, not per tool)."""

from __future__ import annotations

import difflib
import re
import typing
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, RootModel, ValidationError

from zuno import limits
from zuno.config import json_repr

if TYPE_CHECKING:
    from zuno.tool import Tool

_PYDANTIC_WORDS = (
    ("a valid dictionary", "a JSON object"),
    ("a valid list", "a JSON array"),
    ("a valid string", "a string"),
    ("a valid integer", "an integer"),
    ("a valid number", "a number"),
    ("a valid boolean", "true or false"),
    ("Input should be", "must be"),
    ("String should ", "must "),
    ("List should ", "must "),
    ("Tuple should ", "must "),
    ("Set should ", "must "),
    ("Dictionary should ", "must "),
    ("Value should ", "must "),
    ("Value error, ", ""),
)
_PYTHON_NAMES = re.compile(r"\b(None|True|False|dict|dictionary|NoneType)\b")
_JSON_NAMES = {
    "None": "null",
    "NoneType": "null",
    "True": "true",
    "False": "false",
    "dict": "object",
    "dictionary": "object",
}


def _english(msg: str) -> str:
    for py, js in _PYDANTIC_WORDS:
        msg = msg.replace(py, js)
    return _PYTHON_NAMES.sub(lambda m: _JSON_NAMES[m.group(1)], msg).rstrip(".")


_VERB_FIRST = re.compile(r"(must|is|are|cannot|can|should|has|have|needs?|may|only)\b")


def _joined(msg: str) -> str:
    """``msg`` after an argument's name: "argument 'x' must be …", but a tool's own message that
    is a sentence of its own ("a memory key is …") after a colon."""
    return f" {msg}" if _VERB_FIRST.match(msg) else f": {msg}"


def _expected(schema: dict[str, Any]) -> str:
    """What a property takes, in JSON words."""
    if "enum" in schema:
        return "one of " + ", ".join(json_repr(v) for v in schema["enum"])
    kinds = [schema.get("type")] if "type" in schema else [s.get("type") for s in schema.get("anyOf", [])]
    words = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "array": "an array",
        "object": "an object",
    }
    named = [words[k] for k in kinds if isinstance(k, str) and k in words]
    return " or ".join(named) if named else "a value"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation stands for (through Annotated, unions, lists)."""
    out: list[type[BaseModel]] = []
    stack = [annotation]
    while stack:
        t = stack.pop(0)
        if isinstance(t, type) and issubclass(t, BaseModel):
            out.append(t)
        else:
            stack.extend(typing.get_args(t))
    return out


def _action_of(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("action")
    args = typing.get_args(field.annotation) if field is not None else ()
    return args[0] if len(args) == 1 and isinstance(args[0], str) else None


def _where(args_model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, tuple[Any, ...], type[BaseModel] | None]:
    """For an error at ``loc``: which action it is about (an action union's error starts with the
    action's tag), the location without that tag, and the model holding its last part."""
    model: type[BaseModel] | None = args_model
    action = ""
    if issubclass(args_model, RootModel):
        members = {_action_of(m): m for m in _models_in(args_model.model_fields["root"].annotation)}
        if loc and loc[0] in members:
            model, action, loc = members[loc[0]], str(loc[0]), loc[1:]
        else:
            model = None
    for part in loc[:-1]:
        if isinstance(part, str) and model is not None:
            field = model.model_fields.get(part)
            nested = _models_in(field.annotation) if field is not None else []
            model = nested[0] if nested else None
    return action, loc, model


def describe_validation(tool: Tool, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        action, where, model = _where(tool.Args, tuple(e["loc"]))
        loc = ".".join(str(p) for p in where) or "(arguments)"
        name = str(where[-1]) if where else ""
        props = model.model_json_schema().get("properties", {}) if model is not None else {}
        of = f"{tool.name} action '{action}'" if action else tool.name
        if e["type"] == "missing":
            needed = f" for action '{action}'" if action else ""
            parts.append(f"argument '{loc}' is required{needed} ({_expected(props.get(name, {}))}); add it")
        elif e["type"] == "extra_forbidden":
            known = ", ".join(sorted(p for p in props if p != "action")) or "none"
            if len(where) > 1:  # a field of an item inside an argument (a plan step, a todo)
                inside = ".".join(str(p) for p in where[:-1])
                parts.append(f"argument '{loc}' is not a field of '{inside}' in {of}; remove it (known: {known})")
            else:
                parts.append(f"argument '{loc}' is not an argument of {of}; remove it (known: {known})")
        elif e["type"] == "missing_action":  # an action union's tag: absent, or no such action
            given = e.get("input")
            action_sent = given.get("action") if isinstance(given, dict) else None
            listed = (e.get("ctx") or {}).get("actions", "")
            if action_sent is None:
                parts.append(f"argument 'action' is required (one of: {listed}); add it")
            else:
                parts.append(f"argument 'action' must be one of: {listed} (got {json_repr(action_sent)})")
        else:
            parts.append(f"argument '{loc}'{_joined(_english(e['msg']))} (got {json_repr(e.get('input'))})")
    return f"invalid arguments for {tool.name}: " + "; ".join(parts) + ". Correct the call and send it again."


# What models trained on other harnesses call Zuno's tools.
TOOL_ALIASES = {
    "bash": "shell",
    "exec_command": "shell",
    "run_command": "shell",
    "terminal": "shell",
    "view": "read",
    "read_file": "read",
    "cat": "read",
    "ls": "read",
    "list_dir": "read",
    "write_file": "write",
    "create_file": "write",
    "str_replace": "edit",
    "str_replace_editor": "edit",
    "str_replace_based_edit_tool": "edit",
    "multiedit": "edit",
    "find": "glob",
    "find_files": "glob",
    "search": "grep",
    "rg": "grep",
    "ripgrep": "grep",
    "search_files": "grep",
    "fetch": "webfetch",
    "web_fetch": "webfetch",
    "webfetch": "web_fetch",
}


def suggest_tool(name: str, available: list[str]) -> str | None:
    """The available tool a model most likely meant by ``name``: the same name in another case,
    another harness's name for it (``bash`` → ``shell``), or a close spelling."""
    by_fold = {n.casefold(): n for n in available}
    folded = name.casefold()
    if folded in by_fold:
        return by_fold[folded]
    alias = TOOL_ALIASES.get(folded)
    if alias in available:
        return alias
    if alias == "edit" and "apply_patch" in available:
        return "apply_patch"
    close = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=0.75)
    return by_fold[close[0]] if close else None


def available_list(names: list[str]) -> str:
    """The tools a refusal names as available: every one up to ``limits.AVAILABLE_TOOLS_SHOWN_MAX``;
    past it (thousands of connected MCP tools) every tool of Zuno's own and as many connected ones
    as fit, then how many more there are."""
    if len(names) <= limits.AVAILABLE_TOOLS_SHOWN_MAX:
        return ", ".join(names)
    own = [n for n in names if not n.startswith("mcp_") or n in ("mcp_resource_read", "mcp_resource_list")]
    connected = [n for n in names if n not in own]
    room = max(0, limits.AVAILABLE_TOOLS_SHOWN_MAX - len(own))
    rest = len(connected) - room
    find = " (tool_search finds them)" if "tool_search" in names else ""
    return ", ".join(own + connected[:room]) + f", and {rest:,} more connected MCP tools{find}"


def sentence(message: str) -> str:
    """A message as a whole sentence, so text can follow it ("… Nothing ran.")."""
    message = message.rstrip()
    if message.endswith((".", "!", "?", '."', ".)", ".'")):
        return message
    return message + "."


def nothing_ran(message: str) -> str:
    """A refusal's message as a sentence ending by saying that nothing ran, once: a message that
    says it already (a tool's own refusal: "… Nothing ran; send a call that names it to be asked.")
    is kept as it is, not given a second "Nothing ran."."""
    message = sentence(message)
    return message if "nothing ran" in message.lower() else f"{message} Nothing ran."


def measure_call(value: Any) -> str | None:
    """Why a call is too deep or too large to admit (limits.CALL_MAX_DEPTH, CALL_MAX_BYTES), or
    None. Iterative: a call nested any depth is measured without recursion."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limits.CALL_MAX_DEPTH:
                return (
                    f"the call is nested more than {limits.CALL_MAX_DEPTH} levels deep; "
                    "send flat arguments (a tool's arguments are a few levels deep)"
                )
            size += 2
            if isinstance(item, dict):
                for k, v in item.items():
                    size += _text_size(k) + 1
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            size += _text_size(item)
        else:
            size += 8
        if size > limits.CALL_MAX_BYTES:
            return (
                f"the call is larger than {limits.CALL_MAX_BYTES >> 20} MiB; "
                "send less per call (split a large write, or put the data in a file)"
            )
    return None


_SCALARS = (int, float, bool, type(None))


def plain_call(call: Any) -> bool:
    """True when the call is certainly within the bounds ``measure_call`` checks and all its text is
    ASCII (so valid Unicode): an object whose values are scalars, ASCII strings, or objects of those
    (a call with its arguments, the usual shape), in all no larger than the limit. Anything else —
    deeper, larger, or with other text — is measured in full."""
    if not isinstance(call, dict):
        return False
    size = 2
    for k, v in call.items():
        if not isinstance(k, str) or not k.isascii():
            return False
        size += len(k) + 1
        if isinstance(v, str):
            if not v.isascii():
                return False
            size += len(v)
        elif isinstance(v, dict):
            size += 2
            for k2, v2 in v.items():
                if not isinstance(k2, str) or not k2.isascii():
                    return False
                size += len(k2) + 1
                if isinstance(v2, str):
                    if not v2.isascii():
                        return False
                    size += len(v2)
                elif isinstance(v2, _SCALARS):
                    size += 8
                else:
                    return False
        elif isinstance(v, _SCALARS):
            size += 8
        else:
            return False
        if size > limits.CALL_MAX_BYTES:
            return False
    return limits.CALL_MAX_DEPTH >= 2


def _text_size(value: object) -> int:
    if not isinstance(value, str):
        return 8
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass")) + 2


def is_valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(text: str) -> str:
    """An identifier as it can be recorded and echoed: invalid Unicode shown escaped."""
    return text if is_valid_text(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """The dotted name of the first string (key or value) in value that is not valid Unicode."""
    if isinstance(value, str):
        return None if is_valid_text(value) else (where or "(arguments)")
    if isinstance(value, dict):
        for k, v in value.items():
            key = f"{where}.{k}" if where else str(k)
            if not is_valid_text(str(k)):
                return key
            if (found := lone_surrogate(v, key)) is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if (found := lone_surrogate(v, f"{where}[{i}]")) is not None:
                return found
    return None

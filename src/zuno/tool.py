"""What a tool is: its declarations, its argument model, and what it returns.

A tool never sees the transport. It reaches the world only through its ToolContext (the
workspace, the store, artifacts, runtime services); cancellation reaches it as asyncio
cancellation. Errors are values: a tool returns ``ToolOutput.failure(...)`` or raises
``Refused`` for a call that must not run; any other exception becomes an ``error`` outcome.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationInfo, create_model, field_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from zuno.declarations import BlockKind, Concurrency, Declarations, Effect, Outcome, Replay
from zuno.errors import Refused, TransientError

if TYPE_CHECKING:
    from zuno import safefs
    from zuno.config import Config
    from zuno.store import Store
    from zuno.workspace import Workspace


__all__ = [
    "FunctionTool",
    "Refused",
    "Services",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutput",
    "TransientError",
    "tool",
]

_T = TypeVar("_T")

_INTEGER_NUMERAL = re.compile(r"\s*[+-]?\d{1,30}\s*")
_SCALAR_KINDS: dict[tuple[type, str], tuple[str, str] | None] = {}


def _kind_of(annotation: Any) -> str | None:
    """'integer', 'number' or 'boolean' when the annotation takes only that scalar (or null)."""
    kinds: set[Any] = set()
    stack: list[Any] = [annotation]
    while stack:
        t = stack.pop()
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            stack.append(typing.get_args(t)[0])
        elif origin is typing.Union or origin is types.UnionType:
            stack.extend(typing.get_args(t))
        elif t is not type(None):
            kinds.add(t)
    if kinds == {bool}:
        return "boolean"
    if kinds == {int}:
        return "integer"
    if kinds and kinds <= {int, float}:
        return "number"
    return None


def _unwrap(annotation: Any) -> Any:
    """The annotation without Annotated[...] and without an Optional's None."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Union or origin is types.UnionType:
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation


def _scalar_kind(model: type[BaseModel], name: str) -> tuple[str, str] | None:
    """How the field's scalars are read: ("value", kind) for a scalar field, ("items", kind) for a
    list of them, ("values", kind) for an object of them; None when the rule does not apply."""
    key = (model, name)
    if key not in _SCALAR_KINDS:
        field_info = model.model_fields.get(name)
        annotation = _unwrap(field_info.annotation if field_info is not None else None)
        shape: tuple[str, str] | None = None
        if (kind := _kind_of(annotation)) is not None:
            shape = ("value", kind)
        else:
            origin, args = typing.get_origin(annotation), typing.get_args(annotation)
            if origin in (list, tuple, set, frozenset) and len(args) == 1 and (kind := _kind_of(args[0])):
                shape = ("items", kind)
            elif origin is dict and len(args) == 2 and (kind := _kind_of(args[1])):
                shape = ("values", kind)
        _SCALAR_KINDS[key] = shape
    return _SCALAR_KINDS[key]


def _read_field(shape: tuple[str, str], value: Any) -> Any:
    where, kind = shape
    if where == "items" and isinstance(value, list):
        return [_read_scalar(kind, v) for v in value]
    if where == "values" and isinstance(value, dict):
        return {k: _read_scalar(kind, v) for k, v in value.items()}
    return _read_scalar(kind, value) if where == "value" else value


def _read_scalar(kind: str, value: Any) -> Any:
    if value is None:
        return value
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise PydanticCustomError("zuno_boolean", "must be true or false")
    if isinstance(value, bool):
        raise PydanticCustomError(
            "zuno_not_boolean", f"must be {'an integer' if kind == 'integer' else 'a number'}, not a boolean"
        )
    if kind == "integer":
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            if math.isfinite(value) and value.is_integer():
                return int(value)
            raise PydanticCustomError("zuno_integer", "must be an integer (a whole number such as 5)")
        if isinstance(value, str):
            if _INTEGER_NUMERAL.fullmatch(value):
                return int(value)
            raise PydanticCustomError(
                "zuno_integer", 'must be an integer; a string is read only when it is an integer numeral such as "5"'
            )
        raise PydanticCustomError("zuno_integer", "must be an integer")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise PydanticCustomError("zuno_number", "must be a finite number")
        return value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
        raise PydanticCustomError(
            "zuno_number", 'must be a number; a string is read only when it is a numeral such as "2.5"'
        )
    raise PydanticCustomError("zuno_number", "must be a number")


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown fields are refused, not ignored.

    Scalars from a model are read by one rule, for every tool and extension (see
    docs/results.md, "How arguments are read"): an integer argument takes a JSON integer, a float
    only when it is integral (``5.0``), a string only when it is an integer numeral (``"5"``), and
    never a boolean; a number argument takes any JSON number or a numeric string, never a boolean;
    a boolean argument takes ``true`` / ``false`` (or exactly the strings ``"true"`` / ``"false"``),
    never a number or ``"yes"``.
    """

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _scalar_rule(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if name is None:
            return value
        shape = _scalar_kind(cls, name)
        return _read_field(shape, value) if shape else value


@dataclass(slots=True)
class ToolOutput:
    """What a tool hands back.

    ``text`` is the body the model sees, subject to the output limits; ``raw`` is the exact
    bytes it came from (saved byte for byte when the body is withheld; defaults to ``text``
    encoded). ``head`` and ``tail`` are short status lines that are always shown, also when the
    body is withheld (an exit status, a verification receipt). ``bounded`` marks output that is
    already a bounded retrieval window and must never pass through the limits again.
    """

    text: str = ""
    outcome: Outcome = Outcome.ok
    metadata: dict[str, Any] = field(default_factory=dict)
    raw: bytes | None = None
    head: str = ""
    tail: str = ""
    cancelled: bool = False
    bounded: bool = False
    # The exact bytes of the body are already in this file (a command's capture log): the limits
    # measure and withhold it from there, so a huge output is never read whole into memory.
    raw_path: Path | None = None

    @classmethod
    def failure(cls, text: str, **metadata: Any) -> ToolOutput:
        return cls(text=text, outcome=Outcome.error, metadata=dict(metadata))

    @classmethod
    def uncertain(cls, text: str, **metadata: Any) -> ToolOutput:
        return cls(text=text, outcome=Outcome.uncertain, metadata=dict(metadata))

    def body_bytes(self) -> bytes:
        if self.raw is None and self.raw_path is not None:
            return self.raw_path.read_bytes()
        return self.raw if self.raw is not None else self.text.encode("utf-8", "surrogateescape")


@dataclass(slots=True)
class ToolContext:
    """Everything a running tool may touch."""

    workspace: Workspace
    store: Store
    config: Config
    session_id: str
    step: int
    call_id: str
    call_seq: int
    services: Services
    tool_name: str = ""
    # The subject forms an approval was given for at admission (empty when nobody was asked).
    approved: frozenset[str] = frozenset()

    @property
    def root(self):
        return self.workspace.root

    def locate(self, raw: str, *, field: str = "path") -> tuple[Path, safefs.Target]:
        """``workspace.locate`` for this call, with the permission rules applied to the location the
        path resolves to as the tool opens it (see ``check_location``)."""
        resolved, where = self.workspace.locate(raw, field=field)
        self.check_location(resolved, raw, field)
        return resolved, where

    def resolve(self, raw: str, *, field: str = "path") -> Path:
        """``workspace.resolve`` for this call, with ``check_location``."""
        resolved = self.workspace.resolve(raw, field=field)
        self.check_location(resolved, raw, field)
        return resolved

    def check_location(self, resolved: Path, raw: str, field: str) -> None:
        """The permission rules again, on the location a path resolved to when the tool resolved it
        (links resolved once; every later open follows none): what admission decided on the path as
        resolved then cannot be dodged by a link swapped in between. A deny rule refuses; an ask rule
        refuses unless this very location was what the approval was given for."""
        permission = self.config.permission
        if not permission.rules:
            return
        from zuno.permissions import describe_rule, strictest_rule

        forms = self.workspace.location_forms(resolved)
        rule = strictest_rule(permission, self.tool_name, (raw, *forms))
        if rule is None or rule.action == "allow":
            return
        shown = f"{raw!r}" if forms[0] == raw else f"{raw!r} (which is {forms[0]!r})"
        if rule.action == "deny":
            raise Refused(
                BlockKind.denied,
                f"argument '{field}': {shown} is denied by permission rule {describe_rule(rule)}. Nothing ran.",
            )
        if not set(forms) <= self.approved:
            raise Refused(
                BlockKind.denied,
                f"argument '{field}': {shown} is a location permission rule {describe_rule(rule)} asks about, "
                "and no approval was given for it (an approval covers the location the call was asked about). "
                "Nothing ran; send a call that names it to be asked.",
            )


class Services:
    """Runtime-scoped singletons that tools share (a job manager, an rg locator, ...), created
    on first use and closed with the runtime."""

    def __init__(self) -> None:
        self._items: dict[type, Any] = {}
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def get(self, kind: type[_T], factory: Callable[[], _T]) -> _T:
        item = self._items.get(kind)
        if item is None:
            item = factory()
            self._items[kind] = item
            aclose = getattr(item, "aclose", None)
            if aclose is not None:
                self._closers.append(aclose)
        return item

    def peek(self, kind: type[_T]) -> _T | None:
        return self._items.get(kind)

    async def aclose(self) -> None:
        closers, self._closers = self._closers[::-1], []
        for close in closers:
            await close()
        self._items.clear()


class Tool:
    """A model-visible tool. Subclasses set ``name``, ``description``, ``Args`` and
    ``declarations``, and implement ``run``.

    A mixed tool sets ``action_effects``: its effect is then read from the validated
    ``action`` argument, and an absent or unknown action fails closed as SideEffecting.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Args: ClassVar[type[ToolArgs]] = ToolArgs
    declarations: ClassVar[Declarations] = Declarations()
    action_effects: ClassVar[Mapping[str, Effect] | None] = None
    # The tool's run enters no deadline or cancel scope (asyncio.timeout, anyio, httpcore) before
    # its first wait, so a one-call step may start it in the step's own task and move it to a task
    # of its own only if it waits (Python 3.11 has no eager tasks; a small read then needs none).
    starts_in_step_task: ClassVar[bool] = False

    def classify(self, args: ToolArgs) -> Declarations:
        if self.action_effects is None:
            return self.declarations
        action = getattr(args, "action", None)
        effect = self.action_effects.get(str(action), Effect.SideEffecting) if action else Effect.SideEffecting
        base = self.declarations
        if effect is Effect.SideEffecting:
            # A mutation is never replayed by the runtime and never overlaps.
            return Declarations(effect, Replay.Never, Concurrency.Exclusive)
        return Declarations(effect, base.replay, base.concurrency)

    def subject(self, args: ToolArgs) -> str | None:
        """What permission patterns match for this call: a path, a command, a URL."""
        for key in ("path", "command", "url", "outputPath"):
            value = getattr(args, key, None)
            if isinstance(value, str):
                return value
        return None

    def subject_forms(self, args: ToolArgs, workspace: Workspace) -> tuple[str, ...]:
        """Every form of the subject permission patterns match (a rule matches if it matches one):
        the subject and, for each path of it, where it resolves now (``Workspace.subject_forms``)."""
        subject = self.subject(args)
        forms = [subject] if subject is not None else []
        for raw in self.subject_paths(args):
            forms.extend(workspace.subject_forms(raw))
        return tuple(dict.fromkeys(forms))

    def subject_paths(self, args: ToolArgs) -> tuple[str, ...]:
        """The paths of the subject that name locations the tool opens: permission patterns also
        match where they resolve (``Workspace.subject_forms``)."""
        for key in ("path", "outputPath"):
            value = getattr(args, key, None)
            if isinstance(value, str):
                return (value,)
        return ()

    def invalid_arguments_advice(self, arguments: Mapping[str, Any]) -> str | None:
        """Advice added to an ``invalid_arguments`` refusal of these (raw) arguments: what this tool
        can tell of what the model was trying to do. None: the generic message says it all."""
        return None

    def input_schema(self) -> dict[str, Any]:
        """The argument schema every provider and MCP client sees (zuno.schema_export)."""
        from zuno.schema_export import export_args

        return export_args(self.Args)

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        raise NotImplementedError(f"tool {self.name!r} has no run()")  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# The @zuno.tool decorator: a plain function becomes a Tool. The signature is the argument
# schema, the docstring the description, omitted declarations take the strict defaults.

F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E", Effect, Replay, Concurrency)


class FunctionTool(Tool):
    def __init__(self, fn: Callable[..., Any], name: str, description: str, decl: Declarations) -> None:
        self.fn = fn
        self._name = name
        self._description = description
        self._decl = decl
        self._ctx_param: str | None = None
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                self._ctx_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"@zuno.tool {name}: *args/**kwargs cannot become an argument schema")
            default = param.default
            if default is inspect.Parameter.empty:
                fields[pname] = (annotation, ...)
            elif isinstance(default, FieldInfo):
                fields[pname] = (annotation, default)
            else:
                fields[pname] = (annotation, default)
        self._args_model = create_model(f"{name}_args", __base__=ToolArgs, **fields)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        return self._description

    @property
    def Args(self) -> type[ToolArgs]:  # type: ignore[override]
        return self._args_model

    @property
    def declarations(self) -> Declarations:  # type: ignore[override]
        return self._decl

    async def run(self, ctx: ToolContext, args: ToolArgs) -> ToolOutput:
        kwargs = {k: getattr(args, k) for k in type(args).model_fields}
        if self._ctx_param:
            kwargs[self._ctx_param] = ctx
        if inspect.iscoroutinefunction(self.fn):
            value = await self.fn(**kwargs)
        else:
            import asyncio  # (here: a command that reads the store through a tool module runs no loop)

            value = await asyncio.to_thread(self.fn, **kwargs)
        if isinstance(value, ToolOutput):
            return value
        if value is None:
            return ToolOutput(text="")
        if isinstance(value, bytes):
            return ToolOutput(text=value.decode("utf-8", "replace"), raw=value)
        return ToolOutput(text=value if isinstance(value, str) else _as_text(value))


def _as_text(value: Any) -> str:
    """A tool function's return value as the text the model reads: a pydantic model, or a value JSON
    can hold (a dict, a list, a number, a bool), as JSON (what models read best, not Python's
    repr with its single quotes, True and None); anything else as its repr."""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, dict | list | tuple | int | float):
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):  # a value JSON cannot hold somewhere inside
            pass
    return repr(value)


def _declared(kind: type[E], key: str, value: str | E) -> E:
    """``value`` as a declaration of ``kind``, or a ValueError naming the key, the values it takes
    and the one meant when only its case differs."""
    try:
        return kind(value)
    except ValueError:
        names = [m.value for m in kind]
        near = [n for n in names if isinstance(value, str) and n.lower() == value.lower()]
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ValueError(f"@zuno.tool {key}={value!r}: choose one of {', '.join(names)}{hint}.") from None


def tool(
    fn: F | None = None,
    *,
    name: str | None = None,
    effect: str | Effect = Effect.SideEffecting,
    replay: str | Replay = Replay.Never,
    concurrency: str | Concurrency = Concurrency.Exclusive,
) -> Any:
    """Declare a function as a Zuno tool. Omitted declarations take the strict defaults."""

    def wrap(f: F) -> F:
        decl = Declarations(
            _declared(Effect, "effect", effect),
            _declared(Replay, "replay", replay),
            _declared(Concurrency, "concurrency", concurrency),
        )
        description = inspect.cleandoc(f.__doc__ or "").strip() or f"Extension tool {f.__name__}."
        f.__zuno_tool__ = FunctionTool(f, name or f.__name__, description, decl)  # type: ignore[attr-defined]
        return f

    if fn is not None:
        return wrap(fn)
    return wrap

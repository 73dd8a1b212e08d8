"""Tools whose ``action`` is a required enum with one argument shape per action.

The argument model is a pydantic discriminated union on ``action``; the wire schema is one object
whose ``action`` property is the required enum of every operation, its description naming the
fields each one needs (no ``oneOf`` at the top: the provider APIs refuse it; see
zuno.schema_export). A call that names no operation (or an unknown one) is refused at admission with
``invalid_arguments`` — it never reaches the tool.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from operator import or_
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, Discriminator, Tag

from zuno.declarations import Concurrency, Declarations, Effect, Replay
from zuno.schema_export import export_args
from zuno.tool import Tool, ToolContext, ToolOutput
from zuno.tools.state import docstore
from zuno.tools.state.docstore import Delivery, Doc, StateRefusal


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank (only whitespace): write the words it stands for")
    return value


# A title, objective, criterion or reason: at least one character that is not whitespace.
Text = Annotated[str, AfterValidator(_not_blank)]

# An owner names an agent; every request's dynamic context carries it, so it is bounded like a
# title. Checked, not declared: the wire schema stays within its byte budget.
OWNER_MAX_CHARS = 200


def _short_owner(value: str) -> str:
    if len(value) > OWNER_MAX_CHARS:
        raise ValueError(f"is {len(value)} characters; an owner names an agent in at most {OWNER_MAX_CHARS}")
    return value


Owner = Annotated[str, AfterValidator(_short_owner)]

READ = Declarations(Effect.ReadOnly, Replay.Safe, Concurrency.ParallelSafe)
MUTATION = Declarations(Effect.SideEffecting, Replay.Never, Concurrency.Exclusive)


def action_of(args: Any) -> str | None:
    inner = getattr(args, "root", args)
    action = getattr(inner, "action", None)
    return str(action) if action is not None else None


def inner(args: Any) -> Any:
    return getattr(args, "root", args)


def _tag(value: Any) -> Any:
    return value.get("action") if isinstance(value, dict) else getattr(value, "action", None)


def action_union(*models: type[BaseModel]) -> Any:
    """The discriminated union of ``models`` on their ``action`` literal. A missing or unknown
    action is one clear error naming the operations."""
    names = [m.model_fields["action"].annotation.__args__[0] for m in models]  # type: ignore[union-attr]
    members = [Annotated[m, Tag(n)] for m, n in zip(models, names, strict=True)]
    listed = ", ".join(names)
    message = "argument 'action' must be one of: " + listed
    return Annotated[
        reduce(or_, members),
        Discriminator(
            _tag,
            custom_error_type="missing_action",
            custom_error_message=message,
            custom_error_context={"actions": listed},
        ),
    ]


class ActionTool(Tool):
    """A tool with an action union. Subclasses set ``ACTIONS`` (in wire order)."""

    ACTIONS: ClassVar[list[str]] = []

    # A mixed tool: the declarations of each action; an absent or unknown action fails closed
    # (SideEffecting, Never, Exclusive). None: ``declarations`` for every call.
    action_declarations: ClassVar[dict[str, Declarations] | None] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.action_declarations is not None:  # what `zuno tools` lists per action
            cls.action_effects = {a: d.effect for a, d in cls.action_declarations.items()}

    def classify(self, args: Any) -> Declarations:
        if self.action_declarations is None:
            return self.declarations
        action = action_of(args)
        return self.action_declarations.get(action, MUTATION) if action else MUTATION

    def subject(self, args: Any) -> str | None:
        return action_of(args)

    def input_schema(self) -> dict[str, Any]:
        """One object: ``action`` the required enum naming what each action needs, the other
        properties every action's fields (zuno.schema_export.flatten_actions)."""
        return export_args(self.Args, self.ACTIONS or None)


def delivery(ctx: ToolContext, args: Any) -> Delivery:
    payload = inner(args).model_dump(mode="json")
    return Delivery(ctx.call_id, [ctx.tool_name, payload])


def mutate_for_call(
    ctx: ToolContext,
    args: Any,
    scope: str,
    kind: str,
    apply: Callable[[Doc], tuple[dict[str, Any], dict[str, Any]]],
    render: Callable[[dict[str, Any], bool, Doc], ToolOutput],
    also: docstore.Also | None = None,
) -> ToolOutput:
    """One model call's revisioned mutation of a state document: applied once per delivery (a
    repeated delivery returns the stored result), a refusal as its typed output, else ``render``
    of the result, whether it was a repeated delivery, and the document as it now is."""
    try:
        result, replayed = docstore.mutate(ctx.store, scope, kind, delivery(ctx, args), apply, also)
    except StateRefusal as r:
        return r.to_output()
    return render(result, replayed, docstore.read(ctx.store, scope, kind))


def mutation_head(label: str, result: dict[str, Any], replayed: bool) -> str:
    """The first line of a mutation's result: ``[plan patch: revision 4]``."""
    head = f"[{label}: revision {result['revision']}"
    if result.get("unchanged"):
        head += " · nothing changed: the document already said this"
    return head + (" · repeated delivery, applied once]" if replayed else "]")


def mutation_output(label: str, result: dict[str, Any], replayed: bool, document: str, **facts: Any) -> ToolOutput:
    """A mutation's result: its head line, the document as it now is, and the facts of the change."""
    return ToolOutput(
        text=mutation_head(label, result, replayed) + "\n" + document,
        metadata={
            "revision": result["revision"],
            "result": result,
            "replayed": replayed,
            "invalidatesContext": True,
            **facts,
        },
    )

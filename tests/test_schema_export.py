"""The wire schemas of the built-in tools (zuno.schema_export): compact, valid, complete, and
within the prompt-byte budget that keeps deferred MCP schemas worth it (issue 11)."""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field, RootModel

import zuno
from zuno.schema_export import BUILTIN_SURFACE_BUDGET_BYTES, export_args
from zuno.surface import default_registry
from zuno.tool import Tool, ToolArgs

from statehelp import call

BENCH = Path(__file__).resolve().parents[1] / "bench"
BASE_DOC = (ToolArgs.__doc__ or "").split("\n")[0]


def every_builtin() -> list[tuple[str, Tool]]:
    """Every registered tool of every profile (default surface and slots)."""
    return [
        (f"{profile}:{name}", factory()) for (profile, name), factory in sorted(default_registry().factories.items())
    ]


BUILTINS = every_builtin()


def prompt_bytes(tools: list[Tool]) -> int:
    """What bench/mcp_deferred.py counts: name + description + JSON Schema of each tool."""
    return sum(
        len(json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema()})) for t in tools
    )


def schema_objects(node: Any, at_keyword: bool = True) -> list[dict[str, Any]]:
    """Every schema object inside ``node`` (property maps are walked as maps, so a property named
    "title" is not taken for the keyword)."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        out.append(node)
        for key, value in node.items():
            if key in ("properties", "patternProperties", "$defs"):
                for sub in value.values():
                    out += schema_objects(sub)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                for sub in value:
                    out += schema_objects(sub)
            elif isinstance(value, dict):
                out += schema_objects(value)
    return out


@pytest.mark.parametrize(("label", "tool"), BUILTINS, ids=[label for label, _ in BUILTINS])
def test_every_builtin_schema_is_compact_and_valid_for_every_api(label: str, tool: Tool) -> None:
    schema = tool.input_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    # What the provider APIs require at the top: an object, no combinator, enum or not there
    # (Anthropic refuses oneOf/anyOf/allOf; OpenAI also enum/const/not).
    assert schema["type"] == "object" and isinstance(schema["properties"], dict)
    assert not {"oneOf", "anyOf", "allOf", "enum", "const", "not", "description"} & set(schema), label
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text, label
    assert BASE_DOC not in text, f"{label}: ToolArgs's docstring leaked into the schema"
    for node in schema_objects(schema):
        assert "title" not in node or not isinstance(node["title"], str), f"{label}: a title keyword"
        assert node.get("additionalProperties") is not False, label
        assert {"type": "null"} not in node.get("anyOf", []), f"{label}: an optional field still says null"
        assert node.get("default", 0) is not None, f"{label}: default null"
    assert schema["properties"]["intent"] == {"type": "string"}
    assert schema["properties"]["accept_large_output"] == {"type": "boolean"}


def model_fields_present(model: type[BaseModel], schema: dict[str, Any], where: str) -> None:
    """Every field of ``model`` (and of the models nested in it) is a property of ``schema``."""
    props = schema["properties"]
    for name, info in model.model_fields.items():
        assert name in props, f"{where}: field {name!r} is missing from the schema"
        for nested in nested_models(info.annotation):
            sub = props[name]
            sub = sub.get("items", sub)
            objects = [s for s in sub.get("anyOf", [sub]) if s.get("type") == "object"]
            assert any(set(nested.model_fields) <= set(o.get("properties", {})) for o in objects), (
                f"{where}.{name}: the fields of {nested.__name__} are not all in the schema"
            )
            model_fields_present(
                nested, next(o for o in objects if set(nested.model_fields) <= set(o["properties"])), f"{where}.{name}"
            )


def nested_models(annotation: Any) -> list[type[BaseModel]]:
    out = []
    stack = [annotation]
    while stack:
        t = stack.pop()
        if isinstance(t, type) and issubclass(t, BaseModel):
            out.append(t)
        else:
            stack.extend(typing.get_args(t))
    return out


def variants(model: type[BaseModel]) -> list[type[BaseModel]]:
    """The argument models a tool's Args stands for: itself, or each member of an action union."""
    if issubclass(model, RootModel):
        return nested_models(model.model_fields["root"].annotation)
    return [model]


@pytest.mark.parametrize(("label", "tool"), BUILTINS, ids=[label for label, _ in BUILTINS])
def test_every_argument_of_every_args_model_is_still_in_the_schema(label: str, tool: Tool) -> None:
    schema = tool.input_schema()
    for model in variants(tool.Args):
        model_fields_present(model, schema, f"{label}/{model.__name__}")


def test_an_action_union_is_one_object_naming_what_each_action_needs() -> None:
    from zuno.tools.state.goal import GoalUpdateTool

    schema = GoalUpdateTool().input_schema()
    assert schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == [
        "create",
        "add_criteria",
        "satisfy",
        "pause",
        "complete",
        "abandon",
    ]
    assert schema["properties"]["action"]["description"] == (
        "Required. expected_revision (all but create); create: objective, criteria; add_criteria: criteria; "
        "satisfy: criterion_id; pause: reason.kind; abandon: reason"
    )
    # pause takes an object reason, abandon a string one: the merged field accepts both.
    reason = schema["properties"]["reason"]
    validator = jsonschema.Draft202012Validator(schema)
    for args in (
        {"action": "pause", "expected_revision": 2, "reason": {"kind": "blocked", "detail": "CI is down"}},
        {"action": "abandon", "expected_revision": 2, "reason": "superseded by the rewrite"},
        {"action": "create", "objective": "ship", "criteria": [{"text": "tests pass", "requires_evidence": True}]},
        {"action": "satisfy", "expected_revision": 3, "criterion_id": "c1", "evidence": "rcp_1", "intent": "x"},
    ):
        validator.validate(args)
        # intent is cross-cutting: admission takes it off before the model validates
        GoalUpdateTool.Args.model_validate({k: v for k, v in args.items() if k != "intent"})
    assert len(reason["anyOf"]) == 2


# Calls the tools admit, each of which the exported schema must accept too (the schema is a
# superset of what admission takes, never a subset).
ADMITTED: dict[str, list[dict[str, Any]]] = {
    "read": [{"path": "a.txt", "offset": 3, "limit": 10}],
    "shell": [
        {
            "command": "make",
            "exitPolicy": "all",
            "workdir": "src",
            "timeout_ms": 0,
            "interpreter": "dash",
            "run_in_background": True,
            "yield_time_ms": 1000,
            "backgroundPurpose": "remoteObserver",
        },
    ],
    "bg": [{"action": "artifact", "outputPath": "x", "cursor": 0, "limit": 100}, {"action": "cancel", "taskID": "j1"}],
    "webfetch": [{"url": "https://example.org/", "format": "raw", "timeout_ms": 5000, "headers": {"A": "b"}}],
    "web_search": [{"queries": ["a", "b"], "max_results": 3, "allowed_domains": ["x.org"]}],
    "plan_update": [
        {"action": "create", "objective": "o", "steps": [{"title": "t", "status": "in_progress", "owner": "me"}]},
        {"action": "patch", "expected_revision": 2, "steps": [{"id": "s1", "status": "completed", "notes": "n"}]},
        {"action": "push", "expected_revision": 2, "step_id": "s1", "objective": "o", "steps": [{"title": "t"}]},
        {"action": "pop", "expected_revision": 3},
    ],
    "todo_update": [
        {"action": "add", "items": [{"title": "a", "depends_on": ["t1"]}]},
        {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "depends_on": ["t2"]}]},
        {"action": "remove", "expected_revision": 1, "ids": ["t1"]},
    ],
}


@pytest.mark.parametrize("name", sorted(ADMITTED))
def test_the_schema_accepts_every_call_admission_accepts(name: str) -> None:
    tool = next(t for label, t in BUILTINS if label == f"zuno:{name}")
    validator = jsonschema.Draft202012Validator(tool.input_schema())
    for args in ADMITTED[name]:
        tool.Args.model_validate(args)
        validator.validate(args)


async def test_null_for_an_optional_field_is_still_admitted(workspace: Path) -> None:
    (workspace / "f.txt").write_text("one\ntwo\n")
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        read = await call(s, "read", {"path": "f.txt", "offset": None, "limit": None})
        assert read.outcome == "ok" and "two" in read.text
        glob = await call(s, "glob", {"pattern": "*.txt", "path": None})
        assert glob.outcome == "ok" and "f.txt" in glob.text
        plan = await call(
            s,
            "plan_update",
            {
                "action": "create",
                "objective": "o",
                "expected_revision": None,
                "steps": [{"title": "t", "owner": None, "notes": None}],
            },
        )
        assert plan.outcome == "ok", plan.text
        # A null for a required field is still refused, naming it.
        refused = await call(s, "read", {"path": None})
        assert refused.block_kind == "invalid_arguments" and "'path'" in refused.text


def test_the_builtin_surface_fits_its_byte_budget(workspace: Path) -> None:
    rt = zuno.Runtime(root=workspace)
    surface = list(rt.surface.tools.values())
    assert len(surface) >= 16
    assert prompt_bytes(surface) <= BUILTIN_SURFACE_BUDGET_BYTES


def test_the_export_drops_the_base_docstring_of_an_argless_tool() -> None:
    schema = export_args(ToolArgs)
    assert schema == {
        "type": "object",
        "properties": {"intent": {"type": "string"}, "accept_large_output": {"type": "boolean"}},
    }


async def test_deferred_schemas_make_the_whole_visible_surface_85_percent_smaller(workspace: Path) -> None:
    """The issue's target, measured as the bench does: 100 tools of a real MCP server (official
    SDK, stdio), the visible surface's prompt bytes with deferral against without."""
    server = {"command": sys.executable, "args": [str(BENCH / "mcp_catalog.py")]}
    sizes = {}
    for defer in ("never", "always"):
        cfg = {"mcp": {"cat": server}, "tool_search": {"defer": defer}}
        async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
            await s.open()
            visible = s.visible_tools()
            sizes[defer] = prompt_bytes(visible)
            if defer == "never":
                assert sum(t.name.startswith("mcp_cat_") for t in visible) == 100
    assert 1 - sizes["always"] / sizes["never"] >= 0.85, sizes


async def test_a_field_of_another_action_is_refused_naming_what_this_action_takes(workspace: Path) -> None:
    """The wire schema merges every action's fields, so the refusal says what the chosen one takes."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        extra = await call(
            s, "plan_update", {"action": "patch", "expected_revision": 1, "steps": [{"id": "s1"}], "objective": "x"}
        )
        assert extra.block_kind == "invalid_arguments"
        assert (
            "argument 'objective' is not an argument of plan_update action 'patch'; remove it "
            "(known: expected_revision, steps)" in extra.text
        )
        missing = await call(s, "plan_update", {"action": "create", "steps": [{"title": "t"}]})
        assert "argument 'objective' is required for action 'create' (a string); add it" in missing.text
        nested = await call(
            s, "plan_update", {"action": "create", "objective": "o", "steps": [{"id": "s1", "title": "t"}]}
        )
        assert "argument 'steps.0.id' is not a field of 'steps.0' in plan_update action 'create'" in nested.text
        assert "(known: notes, owner, status, title)" in nested.text


def test_the_export_is_made_once_and_every_caller_gets_its_own_copy() -> None:
    tool = next(t for label, t in BUILTINS if label == "zuno:plan_update")
    first = tool.input_schema()
    first["properties"]["steps"]["items"]["properties"].clear()
    first["properties"]["action"]["enum"].append("rewrite")
    again = tool.input_schema()
    assert "title" in again["properties"]["steps"]["items"]["properties"]
    assert again["properties"]["action"]["enum"] == ["create", "patch", "append", "push", "pop"]


class _Node(ToolArgs):
    name: str
    children: list[_Node] = Field(default_factory=list)


class _TreeArgs(ToolArgs):
    root: _Node
    tag: str | None = None


def test_a_recursive_argument_model_keeps_only_the_definitions_it_needs() -> None:
    """An extension's recursive model cannot be inlined: its $defs stay, still compact and valid."""
    _TreeArgs.model_rebuild()
    schema = export_args(_TreeArgs)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"root": {"name": "a", "children": [{"name": "b"}]}, "tag": "t"}, schema)
    assert set(schema["$defs"]) == {"_Node"} and schema["properties"]["tag"] == {"type": "string"}
    assert "title" not in json.dumps(schema)

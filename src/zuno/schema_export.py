"""The one path from a tool's pydantic argument model to the JSON Schema the model sees.

The same schema goes to every provider API (OpenAI chat and Responses, Anthropic) and to MCP
clients, and it is paid for in prompt bytes on every request, so it is compact and still valid:

- no ``title`` keywords (pydantic's "Title Case" echo of the property name);
- ``$ref`` / ``$defs`` inlined at the place they are used;
- an optional field that defaults to null is its plain type (``{"type": "string"}``), not
  ``anyOf: [X, {"type": "null"}]`` with ``default: null``: leaving the field out says the same
  thing. Admission still validates with the pydantic model, so a model that sends null for such
  a field is accepted exactly as before (pydantic reads the null as the default);
- no ``additionalProperties: false``: the property list is already the whole list, and admission
  refuses an unknown argument naming the known ones (the schema stays a superset of what is
  admitted, never a subset);
- no ``minLength: 1`` / ``minItems: 1``: "not empty" is what every model sends anyway, and an
  empty value is refused at admission naming the field;
- no model docstring as a schema ``description`` (the top-level one, and ToolArgs's base
  docstring anywhere): what a tool does is its ``description``, not its argument class's docs;
- an action union (a discriminated union on ``action``) is ONE object: no API accepts
  ``oneOf`` / ``anyOf`` at the top of a tool's parameters (Anthropic: "input_schema does not
  support oneOf, allOf, or anyOf at the top level"; OpenAI: "schema must have type 'object' and
  not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level"). Its ``action`` property is the
  required enum, its other properties are every action's fields merged, and the ``action``
  description names the fields each action requires. The merged object accepts every call the
  union accepts; admission refuses what the chosen action does not take.
"""

from __future__ import annotations

import copy
import functools
import inspect
from typing import Any

from pydantic import BaseModel

__all__ = [
    "BUILTIN_SURFACE_BUDGET_BYTES",
    "CROSS_CUTTING_SCHEMAS",
    "action_needs",
    "compact",
    "export_args",
    "flatten_actions",
]

# The prompt bytes (name + description + schema, as bench/mcp_deferred.py counts them) the default
# surface's built-in tools may cost together. Issue 11's target is a visible surface >= 85%
# smaller with deferred schemas: with the bench's 100 connected tools (86568 bytes), tool_search
# (646) and the two MCP resource tools (847) visible either way, the built-ins must stay under
# (0.15 * 86568 - 646 - 0.85 * 847) / 0.85 = 13670 bytes. 13 KiB kept a margin until the spec's
# goal_request_input (sixteenth round, 439 bytes, with goal_get's and goal_update's descriptions
# shortened to pay for part of it) was added: the budget is now just under the target itself, so any
# further byte on the default surface has to be paid for elsewhere.
BUILTIN_SURFACE_BUDGET_BYTES = 13660

# The cross-cutting arguments every tool takes (admission strips them before validation; see
# zuno.admitting.CROSS_CUTTING). They are on every tool, so they carry no description: intent is a
# UI label that changes nothing whatever a model puts in it, and accept_large_output is explained
# where it matters, in the notice that withholds an output (zuno.output).
CROSS_CUTTING_SCHEMAS: dict[str, dict[str, Any]] = {
    "intent": {"type": "string"},
    "accept_large_output": {"type": "boolean"},
}

# Keywords whose value is one schema, a list of schemas, or a map of name -> schema.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "dependentSchemas", "$defs")
_NULL = {"type": "null"}


def _base_docstring() -> str:
    from zuno.tool import ToolArgs

    return inspect.cleandoc(ToolArgs.__doc__ or "")


def _inline(node: Any, defs: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every local ``$ref`` replaced by its definition. A recursive reference (a
    definition that contains itself) is left as a ``$ref``; the caller keeps ``$defs`` for it."""
    if isinstance(node, list):
        return [_inline(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.split("/")[-1]
        if key in seen or key not in defs:
            return dict(node)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**copy.deepcopy(defs[key]), **rest}, defs, (*seen, key))
    return {k: _inline(v, defs, seen) for k, v in node.items()}


def _drop_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field's schema without its null alternative and its null default."""
    out = {k: v for k, v in schema.items() if not (k == "default" and v is None)}
    alternatives = out.get("anyOf")
    if isinstance(alternatives, list) and _NULL in alternatives:
        rest = [a for a in alternatives if a != _NULL]
        del out["anyOf"]
        if len(rest) == 1 and isinstance(rest[0], dict) and not set(rest[0]) & set(out):
            out = {**rest[0], **out}
        elif rest:
            out["anyOf"] = rest
    return out


def compact(node: Any, base_doc: str | None = None) -> Any:
    """A schema without titles, without the base docstring, with optional-null collapsed."""
    if not isinstance(node, dict):
        return node
    doc = _base_docstring() if base_doc is None else base_doc
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "description" and value == doc:
            continue
        if key == "additionalProperties" and value is False:
            continue
        if key in ("minLength", "minItems") and value == 1:
            continue
        if key in _ONE and isinstance(value, dict):
            out[key] = compact(value, doc)
        elif key in _MANY and isinstance(value, list):
            out[key] = [compact(v, doc) for v in value]
        elif key in _MAP and isinstance(value, dict):
            out[key] = {name: compact(v, doc) for name, v in value.items()}
        else:
            out[key] = value
    props = out.get("properties")
    if isinstance(props, dict):
        required = set(out.get("required", ()))
        for name, schema in props.items():
            if name not in required and isinstance(schema, dict) and schema.get("default", 0) is None:
                props[name] = _drop_null(schema)
    return out


def _merge(a: Any, b: Any) -> Any:
    """One schema that accepts what ``a`` or ``b`` accepts (for one field of two actions)."""
    if a == b:
        return a
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return True
    if a.get("type") == b.get("type") == "object" and "properties" in a and "properties" in b:
        out = {k: v for k, v in a.items() if b.get(k) == v}
        props = dict(a["properties"])
        for name, schema in b["properties"].items():
            props[name] = _merge(props[name], schema) if name in props else schema
        out["properties"] = props
        required = [r for r in a.get("required", []) if r in b.get("required", [])]
        if required:
            out["required"] = required
        else:
            out.pop("required", None)
        return out
    if a.get("type") == b.get("type") == "array" and "items" in a and "items" in b:
        out = _loosen(a, b)
        out["items"] = _merge(a["items"], b["items"])
        return out
    if a.get("type") == b.get("type") and "anyOf" not in a and "anyOf" not in b:
        if "enum" in a and "enum" in b:
            merged = {**_loosen(a, b), "enum": a["enum"] + [v for v in b["enum"] if v not in a["enum"]]}
            return merged
        if "enum" not in a and "enum" not in b and "const" not in a and "const" not in b:
            return _loosen(a, b)
    alternatives = [x for s in (a, b) for x in (s["anyOf"] if set(s) == {"anyOf"} else [s])]
    unique: list[Any] = []
    for x in alternatives:
        if x not in unique:
            unique.append(x)
    return {"anyOf": unique}


def _loosen(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The keywords of two schemas of one type: equal ones kept, bounds widened, descriptions
    joined; a bound that only one side has is dropped (the other side has none)."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*a, *b]):
        if key in ("items", "enum", "anyOf", "properties"):
            continue
        x, y = a.get(key), b.get(key)
        if x == y:
            out[key] = x
        elif key == "description" and (x or y):
            out[key] = " ".join(d for d in (x, y) if d)
        elif x is None or y is None:
            continue
        elif key.startswith("min"):
            out[key] = min(x, y)
        elif key.startswith("max"):
            out[key] = max(x, y)
    return out


def _lost(variant: dict[str, Any], merged: dict[str, Any], prefix: str = "") -> list[str]:
    """The required fields of ``variant`` (one action) that ``merged`` no longer requires, as
    dotted paths (``steps[].title``): what the ``action`` description must name."""
    out: list[str] = []
    merged_required = set(merged.get("required", ()))
    props, merged_props = variant.get("properties", {}), merged.get("properties", {})
    for name in variant.get("required", ()):
        path = f"{prefix}{name}"
        if name not in merged_required:
            out.append(path)
        sub, merged_sub = props.get(name, {}), merged_props.get(name, {})
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            out += _lost(
                sub["items"], merged_sub.get("items", {}) if isinstance(merged_sub, dict) else {}, path + "[]."
            )
        elif sub.get("type") == "object":
            out += _lost(sub, merged_sub if isinstance(merged_sub, dict) else {}, path + ".")
    return out


def action_needs(variants: list[dict[str, Any]], merged: dict[str, Any], key: str = "action") -> dict[str, list[str]]:
    """Each action's name and the fields (paths) it requires that the merged object does not."""
    needs: dict[str, list[str]] = {}
    for v in variants:
        name = v["properties"][key].get("const")
        paths = [p for p in _lost(v, merged) if p != key]
        # "steps[].title" says "steps" too
        needs[name] = [p for p in paths if not any(q.startswith((p + "[].", p + ".")) for q in paths)]
    return needs


def _say_needs(needs: dict[str, list[str]]) -> str:
    """``expected_revision (all but create); create: objective, steps[].title; ...``: a field all
    actions but one require is said once; an action that requires nothing else is not named."""
    parts: list[str] = []
    common: list[str] = []
    if len(needs) >= 3:
        for path in dict.fromkeys(p for paths in needs.values() for p in paths):
            without = [a for a, paths in needs.items() if path not in paths]
            if len(without) <= 1:
                common.append(path)
                parts.append(f"{path} (all but {without[0]})" if without else f"{path} (all)")
    for action, paths in needs.items():
        rest = [p for p in paths if p not in common]
        if rest:
            parts.append(f"{action}: {', '.join(rest)}")
    return "; ".join(parts)


def _descriptions_by_action(variants: list[dict[str, Any]], key: str) -> dict[str, str]:
    """For a field whose description differs between actions: one description naming which
    action each part belongs to ("list_items: ... search_contents: ...")."""
    groups: dict[str, dict[str, list[str]]] = {}
    for v in variants:
        action = v["properties"][key].get("const")
        for name, schema in v["properties"].items():
            if name != key and isinstance(schema, dict) and schema.get("description"):
                groups.setdefault(name, {}).setdefault(schema["description"], []).append(action)
    return {
        name: " ".join(f"{', '.join(actions)}: {text}" for text, actions in by_text.items())
        for name, by_text in groups.items()
        if len(by_text) > 1
    }


def flatten_actions(variants: list[dict[str, Any]], actions: list[str], key: str = "action") -> dict[str, Any]:
    """One object schema for a discriminated union on ``key`` (compacted variants): ``key`` is a
    required enum whose description names what each action requires; the other properties are
    the variants' fields merged."""
    by_action = {v["properties"][key].get("const"): v for v in variants}
    ordered = [by_action[a] for a in actions if a in by_action]
    merged: dict[str, Any] = {"type": "object", "properties": {}}
    said_by = _descriptions_by_action(ordered, key)
    for v in ordered:
        for name, schema in v["properties"].items():
            if name == key:
                continue
            if name in said_by:
                schema = {k: x for k, x in schema.items() if k != "description"}
            props = merged["properties"]
            props[name] = _merge(props[name], schema) if name in props else schema
    for name, said in said_by.items():
        merged["properties"][name]["description"] = said
    action = {"type": "string", "enum": [a for a in actions if a in by_action]}
    action["description"] = "Required. " + _say_needs(action_needs(ordered, merged, key))
    return {"type": "object", "properties": {key: action, **merged["properties"]}, "required": [key]}


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    return isinstance(node, list) and any(_has_ref(v) for v in node)


def export_args(model: type[BaseModel], actions: list[str] | None = None) -> dict[str, Any]:
    """The wire schema of a tool's argument model, with the cross-cutting arguments (a fresh copy:
    the caller may change it; the export itself is made once per model)."""
    return copy.deepcopy(_export(model, tuple(actions) if actions else None))


@functools.lru_cache(maxsize=1024)
def _export(model: type[BaseModel], actions: tuple[str, ...] | None) -> dict[str, Any]:
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    schema = compact(_inline(raw, defs))
    if _has_ref(schema):  # a recursive model: its definitions stay, compacted
        schema["$defs"] = {name: compact(d) for name, d in defs.items()}
    variants = schema.get("oneOf", schema.get("anyOf"))
    if actions and isinstance(variants, list):
        schema = flatten_actions(variants, list(actions))
    schema.pop("description", None)
    schema["type"] = "object"
    props = schema.setdefault("properties", {})
    for name, cross in CROSS_CUTTING_SCHEMAS.items():
        props.setdefault(name, copy.deepcopy(cross))
    return schema

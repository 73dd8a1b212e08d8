"""Connected MCP tools as Zuno tools, and the resource tools.

A connected tool's arguments are checked against the server's own input schema at admission
(a mismatch is ``blocked: invalid_arguments``, nothing sent). Its result keeps text, images and
embedded resources: text inline, binary parts saved as artifacts and named. A big result is
withheld like any output. A server that fails gives a typed result naming it: ``error`` for a
ReadOnly call, ``uncertain`` for any other (its effect may have happened).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import jsonschema
import mcp_types as types
from pydantic import ConfigDict, Field, model_validator

from zuno.admission import sentence
from zuno.declarations import READ_ONLY_PARALLEL, Declarations, Effect, Outcome
from zuno.output import Artifacts
from zuno.tool import Tool, ToolArgs, ToolContext, ToolOutput

if TYPE_CHECKING:
    from zuno.connect.mcp.hub import McpHub

from zuno.connect.mcp.link import LinkError


class InvalidInputSchema(ValueError):
    """A connected tool's input schema is not valid JSON Schema: the tool is left out."""


def _args_model(schema: dict[str, Any], name: str) -> type[ToolArgs]:
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.path) or "(top)"
        raise InvalidInputSchema(f"its input schema is not valid JSON Schema at {where}: {e.message}") from None
    validator = validator_cls(schema)

    class McpArgs(ToolArgs):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            try:
                errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
            except Exception as e:  # a $ref to nowhere, say: the schema, not the call, is wrong
                raise ValueError(
                    f"the server's input schema of {name} cannot be checked ({type(e).__name__}: {e}); "
                    "the call was not sent"
                ) from None
            if errors:
                e = errors[0]
                where = ".".join(str(p) for p in e.path) or "(arguments)"
                raise ValueError(f"{where}: {e.message} (the server's input schema of {name})")
            return data

    McpArgs.__name__ = f"{name}_args"
    return McpArgs


def render_content(ctx: ToolContext, blocks: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The text of a result's content blocks, with binary parts saved as artifacts."""
    artifacts = Artifacts(ctx.workspace, ctx.store)
    parts: list[str] = []
    kept: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
            kept.append({"type": "text", "bytes": len(block.text.encode())})
        elif kind in ("image", "audio"):
            data = base64.b64decode(block.data)
            saved = artifacts.save(ctx.session_id, ctx.call_seq, f"{ctx.call_id}_{i}", data, kind=f"mcp-{kind}")
            parts.append(f"[{kind} {block.mime_type}, {len(data)} bytes, saved as {saved.path}]")
            kept.append({"type": kind, "mimeType": block.mime_type, "bytes": len(data), "path": saved.path})
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                parts.append(f"[resource {res.uri}]\n{res.text}")
                kept.append({"type": "resource", "uri": str(res.uri), "mimeType": res.mime_type})
            else:
                data = base64.b64decode(res.blob)
                saved = artifacts.save(ctx.session_id, ctx.call_seq, f"{ctx.call_id}_{i}", data, kind="mcp-resource")
                parts.append(f"[resource {res.uri}, {len(data)} bytes, saved as {saved.path}]")
                kept.append({"type": "resource", "uri": str(res.uri), "bytes": len(data), "path": saved.path})
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}" + (f" ({block.name})" if block.name else "") + "]")
            kept.append({"type": "resource_link", "uri": str(block.uri)})
        else:
            parts.append(f"[{kind or 'unknown'} content]")
            kept.append({"type": kind or "unknown"})
    return "\n".join(parts), kept


def link_failure(e: LinkError, decl: Declarations) -> ToolOutput:
    facts = {"mcpError": {"server": e.server, "kind": e.kind}}
    if decl.effect is Effect.ReadOnly:
        return ToolOutput(
            text=f"[error] {sentence(e.message)} Nothing was changed by this read-only call.",
            outcome=Outcome.error,
            metadata=facts,
        )
    return ToolOutput(
        text=f"[uncertain] {sentence(e.message)} Whether the call had its effect is unknown; inspect the state it "
        "would have changed before calling it again.",
        outcome=Outcome.uncertain,
        metadata=facts,
    )


class McpTool(Tool):
    """``mcp_<server>_<tool>``: one tool of a connected server."""

    def __init__(self, hub: McpHub, server: str, remote: types.Tool, name: str, decl: Declarations) -> None:
        self.hub = hub
        self.server = server
        self.remote = remote
        self._name = name
        self._decl = decl
        self._schema = dict(remote.input_schema or {"type": "object"})
        self._args = _args_model(self._schema, name)
        desc = remote.description or remote.title or remote.name
        self._description = f"{desc} (MCP server {server!r}, tool {remote.name!r})"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        return self._description

    @property
    def Args(self) -> type[ToolArgs]:  # type: ignore[override]
        return self._args

    @property
    def declarations(self) -> Declarations:  # type: ignore[override]
        return self._decl

    def subject(self, args: ToolArgs) -> str | None:
        return None

    def input_schema(self) -> dict[str, Any]:
        schema = json.loads(json.dumps(self._schema))
        schema.setdefault("type", "object")
        props = schema.setdefault("properties", {})
        props.setdefault("intent", {"type": "string", "description": "A short label for the UI. It changes nothing."})
        return schema

    async def run(self, ctx: ToolContext, args: ToolArgs) -> ToolOutput:
        arguments = args.model_dump()
        try:
            result, note = await self.hub.call(self.server, self.remote.name, arguments)
        except LinkError as e:
            return link_failure(e, self._decl)
        text, kept = render_content(ctx, list(result.content))
        meta: dict[str, Any] = {"mcp": {"server": self.server, "tool": self.remote.name, "content": kept}}
        if result.structured_content is not None:
            meta["mcp"]["structuredContent"] = result.structured_content
        if note:
            meta["mcp"]["reconnected"] = note
        return ToolOutput(
            text=text,
            outcome=Outcome.error if result.is_error else Outcome.ok,
            metadata=meta,
            head=f"[mcp: server {self.server!r} was restarted: {note}]" if note else "",
        )


class ResourceReadArgs(ToolArgs):
    server: str = Field(description="The connected MCP server (its name in the config).")
    uri: str = Field(min_length=1, description="The resource URI, as mcp_resource_list shows it.")


class ResourceListArgs(ToolArgs):
    server: str | None = Field(None, description="One server; all connected servers when absent.")


class ResourceReadTool(Tool):
    name = "mcp_resource_read"
    description = "Read a resource of a connected MCP server by URI (text inline; binary saved as an artifact)."
    Args = ResourceReadArgs
    declarations = READ_ONLY_PARALLEL

    def __init__(self, hub: McpHub) -> None:
        self.hub = hub

    def subject(self, args: ToolArgs) -> str | None:
        a: Any = args
        return f"{a.server}:{a.uri}"

    async def run(self, ctx: ToolContext, args: ResourceReadArgs) -> ToolOutput:
        try:
            result = await self.hub.read_resource(args.server, args.uri)
        except LinkError as e:
            return link_failure(e, self.declarations)
        blocks = [types.EmbeddedResource(type="resource", resource=c) for c in result.contents]
        text, kept = render_content(ctx, blocks)
        return ToolOutput(text=text, metadata={"mcp": {"server": args.server, "uri": args.uri, "content": kept}})


class ResourceListTool(Tool):
    name = "mcp_resource_list"
    description = "List the resources connected MCP servers offer (uri, name, mimeType), for mcp_resource_read."
    Args = ResourceListArgs
    declarations = READ_ONLY_PARALLEL

    def __init__(self, hub: McpHub) -> None:
        self.hub = hub

    async def run(self, ctx: ToolContext, args: ResourceListArgs) -> ToolOutput:
        rows, failures, without = await self.hub.list_resources(args.server)
        lines = [f"{r['server']}\t{r['uri']}\t{r.get('name') or ''}\t{r.get('mimeType') or ''}" for r in rows]
        lines += [f"[error] {f}" for f in failures]
        empty = "no resources"
        if without:
            who = ", ".join(map(repr, without))
            empty += f" (MCP server {who} declares none)" if len(without) == 1 else f" (MCP servers {who} declare none)"
        return ToolOutput(
            text="\n".join(lines) or empty,
            metadata={"resources": rows, "failures": failures, "withoutResources": without},
            outcome=Outcome.error if failures and not rows else Outcome.ok,
        )

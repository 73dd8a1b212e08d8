"""The user's MCP servers for one runtime: started on first need (a session opening), at most
``concurrency.mcp_connections`` starting or serving at once, their tools registered as
``mcp_<server>_<tool>``.

A server that cannot start does not stop the others: its tools are absent and the reason is
kept (``failures``) for the session to say. A name collision is a configuration error: nothing
of the colliding servers is registered, and the message names both tools.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types

from zuno.config import Config, ConfigError
from zuno.connect.mcp.link import Link, LinkError
from zuno.connect.mcp.names import declarations_for, tool_name
from zuno.connect.mcp.tools import InvalidInputSchema, McpTool, ResourceListTool, ResourceReadTool
from zuno.tool import Tool


class McpHub:
    def __init__(self, config: Config, root: Path, log_dir: Path) -> None:
        self.config = config
        self.links = {name: Link(name, cfg, root, log_dir) for name, cfg in config.mcp.items() if cfg.enabled}
        self._bound = asyncio.Semaphore(config.concurrency.mcp_connections)
        self.tools: dict[str, McpTool] = {}
        self.failures: dict[str, str] = {}
        self.left_out: dict[str, str] = {}  # connected tools that cannot be offered, and why
        self._started = False
        self._lock = asyncio.Lock()

    @property
    def configured(self) -> bool:
        return bool(self.links)

    async def start(self, taken: set[str]) -> dict[str, Tool]:
        """Connect every enabled server and list its tools; ``taken`` are the names already on the
        surface. Returns the tools to add (connected tools and the resource tools)."""
        async with self._lock:
            if self._started:
                return self._surface()
            self._started = True

            async def one(name: str, link: Link) -> tuple[str, list[types.Tool] | str]:
                async with self._bound:
                    try:
                        return name, await link.list_tools()
                    except LinkError as e:
                        return name, e.message

            listed = await asyncio.gather(*(one(n, link) for n, link in self.links.items()))
            # Zuno's own resource tools are built-in names too: a server's tool never shadows them.
            builtin = taken | {ResourceReadTool.name, ResourceListTool.name}
            owners: dict[str, str] = {n: "a built-in tool" for n in builtin}
            for server, got in listed:
                if isinstance(got, str):
                    self.failures[server] = got
                    continue
                cfg = self.config.mcp[server]
                allowed = set(cfg.allowed_tools) if cfg.allowed_tools is not None else None
                for remote in got:
                    if allowed is not None and remote.name not in allowed:
                        continue
                    name = tool_name(server, remote.name)
                    if name in owners:
                        raise ConfigError(
                            f"config key mcp.{server}: tool {remote.name!r} would be registered as {name!r}, "
                            f"which is already {owners[name]}. Rename the server, or leave one of them out "
                            f"with allowed_tools."
                        )
                    owners[name] = f"tool {remote.name!r} of MCP server {server!r}"
                    decl = declarations_for(remote.annotations, cfg.trusted, cfg.declarations.get(remote.name))
                    try:
                        self.tools[name] = McpTool(self, server, remote, name, decl)
                    except InvalidInputSchema as e:  # it could never be checked: left out, said once
                        self.left_out[name] = f"tool {remote.name!r} of MCP server {server!r} is left out: {e}"
            return self._surface()

    def _surface(self) -> dict[str, Tool]:
        out: dict[str, Tool] = dict(self.tools)
        if any(n not in self.failures for n in self.links):
            out[ResourceReadTool.name] = ResourceReadTool(self)
            out[ResourceListTool.name] = ResourceListTool(self)
        return out

    def link(self, server: str) -> Link:
        link = self.links.get(server)
        if link is None:
            raise LinkError(
                server, "unknown", f"there is no connected MCP server {server!r} (known: {sorted(self.links)})"
            )
        return link

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> tuple[types.CallToolResult, str | None]:
        link = self.link(server)
        async with self._bound:
            note = None
            if link.ended_because is not None and link.starts:
                note = await link.restart_note()
            result = await link.request(f"tools/call {tool}", lambda c: c.call_tool(tool, arguments))
        return result, note

    async def read_resource(self, server: str, uri: str) -> types.ReadResourceResult:
        link = self.link(server)
        async with self._bound:
            return await link.request(f"resources/read {uri}", lambda c: c.read_resource(uri))

    async def list_resources(self, server: str | None) -> tuple[list[dict[str, Any]], list[str], list[str]]:
        """The resources of one server or of every connected one, the failures, and the servers
        that declare no resources (skipped: asking them would only be "Method not found")."""
        names = [server] if server else [n for n in self.links if n not in self.failures]
        rows: list[dict[str, Any]] = []
        failures: list[str] = []
        without: list[str] = []
        for name in names:
            try:
                link = self.link(name)
                async with self._bound:
                    if (await link.client()).server_capabilities.resources is None:
                        without.append(name)
                        continue
                    listed = await link.request("resources/list", lambda c: c.list_resources())
            except LinkError as e:
                failures.append(e.message)
                continue
            for r in listed.resources:
                rows.append({"server": name, "uri": str(r.uri), "name": r.name, "mimeType": r.mime_type})
        return rows, failures, without

    async def aclose(self) -> None:
        await asyncio.gather(*(link.aclose() for link in self.links.values()), return_exceptions=True)

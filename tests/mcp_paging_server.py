"""An MCP server (the official SDK's low-level server) that lists its tools page by page, for
Zuno's client tests.

Run: python mcp_paging_server.py TOOLS PAGE [--stuck] [--bad-schemas]. Its tools t0 .. t<TOOLS-1>
answer their own name; each tools/list page holds PAGE of them. --stuck sends the same next cursor
forever; --bad-schemas adds "badtype" (its input schema is not valid JSON Schema) and "badref" (a
$ref to nowhere) to the first page.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS, PAGE = int(sys.argv[1]), int(sys.argv[2])
STUCK = "--stuck" in sys.argv


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    start = 0 if STUCK or params is None or not params.cursor else int(params.cursor)
    end = min(TOOLS, start + PAGE)
    tools = [
        types.Tool(name=f"t{i}", description=f"tool {i}", input_schema={"type": "object"}) for i in range(start, end)
    ]
    if "--bad-schemas" in sys.argv and start == 0:
        tools.append(
            types.Tool(name="badtype", input_schema={"type": "object", "properties": {"a": {"type": "strng"}}})
        )
        ref = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
        tools.append(types.Tool(name="badref", input_schema=ref))
    return types.ListToolsResult(tools=tools, next_cursor="again" if STUCK else (str(end) if end < TOOLS else None))


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])


server = Server("paging", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

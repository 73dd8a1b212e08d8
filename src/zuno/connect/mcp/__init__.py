"""Zuno as an MCP client: the user's servers, their tools as ``mcp_<server>_<tool>``,
resources, deferred schemas and ``tool_search``."""

from zuno.connect.mcp.hub import McpHub
from zuno.connect.mcp.names import declarations_for, tool_name
from zuno.connect.mcp.search import ToolSearchTool, expanded_names, should_defer

__all__ = ["McpHub", "ToolSearchTool", "declarations_for", "expanded_names", "should_defer", "tool_name"]

"""``zuno mcp``: Zuno's surface served over MCP (stdio and streamable HTTP)."""

from zuno.serve.mcp.server import Frontend, build_server

__all__ = ["Frontend", "build_server"]

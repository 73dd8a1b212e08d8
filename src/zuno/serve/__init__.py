"""Transports that expose the surface: ``zuno mcp`` (stdio, streamable HTTP)."""

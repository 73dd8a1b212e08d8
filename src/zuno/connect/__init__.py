"""What Zuno consumes: web search providers (and, later, MCP client servers)."""

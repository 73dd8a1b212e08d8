"""What Zuno consumes: the user's MCP servers."""

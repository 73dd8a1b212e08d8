"""What Zuno consumes: web search providers and the user's MCP servers."""

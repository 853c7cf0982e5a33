"""MCP servers a client configures for a session: connected over stdio or http and exposed as
tools."""

__all__: list[str] = []

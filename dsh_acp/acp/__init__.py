"""The Agent Client Protocol: the method handlers, what clients send (validated params), what the
agent sends (session updates, tool cards), and the client's own file system, terminals and forms."""

__all__: list[str] = []

"""The Agent Client Protocol's method handlers: ``initialize``, the session methods, the prompt
runner, slash commands, the pickers, and the client's own file system, terminals and forms. What
they send and read on the wire is built in ``dsh_acp.wire``."""

__all__: list[str] = []

"""dsh_acp: the ACP agent side — framing, connection, protocol, bridge, loop, CLI, testing kit."""

__all__: list[str] = []

"""One launch of the agent: the command line's flags and the ``AgentConfig`` they describe, and
serving one client on a pair of byte streams."""

__all__: list[str] = []

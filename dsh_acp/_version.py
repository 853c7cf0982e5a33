"""The agent's version, in a module of its own: the model client and the MCP client send it, and
they must not import the configuration (which names the model source, which builds them)."""

__all__ = ["VERSION"]

VERSION = "0.1.0"

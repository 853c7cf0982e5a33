"""The agent as a network service: ACP over Streamable HTTP and WebSocket (``dsh-acp --listen``).

Each network connection is an ACP connection of its own, with its own ``initialize`` and its own
agent (the one stdio runs, over an in-memory pipe); sessions live in the one durable store. The
server stack (uvicorn, Starlette, websockets) is imported only here, never on the stdio path.
"""

__all__: list[str] = []

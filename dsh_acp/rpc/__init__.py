"""JSON-RPC 2.0 over byte streams: sans-IO framing, the errors, the two-way connection, the
prelude that answers the first requests before it exists, the guarded stdio and the in-memory
pipes tests talk over. Knows nothing of ACP."""

__all__: list[str] = []

"""JSON-RPC 2.0 over byte streams: sans-IO framing, the two-way connection, the guarded stdio
and the in-memory pipes tests talk over. Knows nothing of ACP."""

__all__: list[str] = []

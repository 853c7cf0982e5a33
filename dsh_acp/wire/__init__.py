"""The ACP wire shapes: the session updates and client requests the agent sends, the render
bridge from tool cards to them, the client's profile, and the validated params clients send."""

__all__: list[str] = []

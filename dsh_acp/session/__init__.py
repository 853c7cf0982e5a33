"""A session and its durability: its typed events and the one reducer that applies them, the
append-only log, replay of that log and the claims that keep two agents from writing one log."""

__all__: list[str] = []

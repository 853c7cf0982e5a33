"""One prompt turn: the agent loop, the tool calls it checks and runs, their coalesced output,
slash commands, compaction, titles, the system prompt and the tools' previews shown before a
call is approved."""

__all__: list[str] = []

"""One prompt turn: the agent loop, the tool calls it checks and runs, their coalesced output,
slash commands, compaction, titles, the system prompt and the whole-file diffs shown before an
edit is approved."""

__all__: list[str] = []

"""The ACP v2 wire shapes (the draft the pinned ``@agentclientprotocol/sdk`` ships as
``schema/v2``): the same render intents as v1's (``dsh_acp.wire``), drawn the way v2 says. A
card is composed once, by v1's bridge, and ``_bridge`` spells in v2 what v2 spells otherwise.

What differs from v1, and lives here alone: a tool call is one upsert (``tool_call_update``) whose
diffs are structured file changes with a git patch; commands run in terminals the agent owns,
shown by reference and fed by ``terminal_update`` / ``terminal_output_chunk``; every message has
an id, and a prompt's own message is echoed; a turn is bracketed by ``state_update``s (the prompt's
answer only says it was accepted); plans are ``plan_update``s of one plan; modes are a config
option; a permission request has a title, a description and a subject; ``initialize`` names the
two sides ``info`` and ``capabilities``. What v2 spells as v1 does (notices, usage, titles,
compactions) is built by the v1 builders.

Importing this package is light (no views, no pydantic): ``initialize`` is answered from
``_handshake`` on the agent's start-up path.
"""

__all__: list[str] = []

"""Helpers shared by the agent tests: scripted configs and small test tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_acp._config import AgentConfig, counter_ids
from dsh_acp._scripted import ScriptedModel
from dsh_tools import ToolDefinition


def scripted(
    turns: list[list[dict[str, Any]]],
    tools: Sequence[ToolDefinition] = (),
    **overrides: Any,
) -> AgentConfig:
    """An agent config with a scripted model, deterministic ids and the given tools."""
    config = AgentConfig(
        model=lambda: ScriptedModel(turns, source="test-script"),
        model_accepts_images=True,
        tools=lambda: list(tools),
        session_ids=counter_ids("sess-"),
        message_ids=counter_ids("msg-"),
        coalesce_delay=None,
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    return config

"""Helpers shared by the agent tests: scripted configs and small test tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from dsh_acp import AgentConfig, Model, ModelChoice, ModelEvent, ModelRequest, ScriptedModel, counter_ids
from dsh_tools import ToolDefinition


def scripted(
    turns: list[list[dict[str, Any]]],
    tools: Sequence[ToolDefinition] = (),
    **overrides: Any,
) -> AgentConfig:
    """An agent config with a scripted model, deterministic ids and the given tools."""
    config = AgentConfig(
        models=[
            ModelChoice(
                "script",
                "Test script",
                lambda: ScriptedModel(turns, source="test-script"),
                accepts_images=True,
            )
        ],
        tools=lambda: list(tools),
        session_ids=counter_ids("sess-"),
        message_ids=counter_ids("msg-"),
        coalesce_delay=None,
        default_mode="bypass",  # tests of cards run everything; permission tests pick their mode
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


class RecordingModel(Model):
    """Wraps a model and keeps every request it was sent (what the model saw)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def accepts_images(self) -> bool:
        return bool(self.inner.accepts_images)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        stream: AsyncIterator[ModelEvent] = self.inner.stream(request)
        return stream


def recorded(
    turns: list[list[dict[str, Any]]], tools: Sequence[ToolDefinition] = (), **overrides: Any
) -> tuple[AgentConfig, list[RecordingModel]]:
    """Like ``scripted``, also returning the list of models built (one per session)."""
    models: list[RecordingModel] = []

    def build() -> RecordingModel:
        model = RecordingModel(ScriptedModel(turns, source="test-script"))
        models.append(model)
        return model

    config = scripted(turns, tools, **overrides)
    config.models = [ModelChoice("script", "Test script", build, accepts_images=True)]
    return config, models


def slow_child_watcher(monkeypatch: Any, delay: float) -> None:
    """Make asyncio's child watcher see each exit ``delay`` seconds late, as on a loaded machine.

    The watcher is a thread per child blocked in ``os.waitpid(pid, 0)``; here it first waits for
    the exit without reaping (``WNOWAIT``), then sleeps, so the exited child stays a zombie whose
    status nobody has delivered yet: anything else that reaps it then steals its status.
    """
    import os
    import threading
    import time

    real_waitpid = os.waitpid

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        if options == 0 and threading.current_thread() is not threading.main_thread():
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            time.sleep(delay)
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "waitpid", waitpid)

"""A session's pickers: its permission mode, model, reasoning effort and reasoning display, changed
from the editor's pickers (``session/set_mode``, ``session/set_config_option``) or by a slash command,
and the updates that keep every picker in step after a change."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from dsh_acp._config import AgentConfig
from dsh_acp.permissions._modes import MODES, modes_wire
from dsh_acp.rpc._errors import invalid_params
from dsh_acp.session._events import ConfigChanged, ModeChanged
from dsh_acp.session._session import Session
from dsh_acp.wire._updates import ConfigOption
from dsh_acp.wire.v2._updates import available_commands, config_option

from ._config_options import EFFORT_OPTION, REASONING_OPTION, config_options, efforts
from ._session_manager import SessionManager

__all__ = ["SessionPickers"]


class SessionPickers:
    """Reads and changes the settings a session's pickers show."""

    def __init__(self, config: AgentConfig, sessions: SessionManager) -> None:
        self.config = config
        self._sessions = sessions

    def options(self, session: Session) -> list[ConfigOption]:
        """The session's complete config option list, as every answer and update carries it."""
        return config_options(session, self.config.models, boolean=self._sessions.profile.boolean_options)

    def answer(self, session: Session) -> dict[str, Any]:
        """The pickers part of a ``session/new``, ``load``, ``resume`` or ``fork`` answer (v2 has
        no modes apart from the config options, and gives a session's commands in its answer)."""
        if self._sessions.profile.protocol == 2:
            listed = self._sessions.commands["availableCommands"]
            return {
                "configOptions": [config_option(option) for option in self.options(session)],
                "availableCommands": available_commands(
                    (c["name"], c["description"], c["input"]["hint"] if "input" in c else None)
                    for c in listed
                ),
            }
        return {"modes": modes_wire(session.permissions), "configOptions": self.options(session)}

    def options_answer(self, session: Session) -> list[dict[str, Any]]:
        """The ``configOptions`` of a ``session/set_config_option`` answer."""
        if self._sessions.profile.protocol == 2:
            return [config_option(option) for option in self.options(session)]
        return [dict(option) for option in self.options(session)]

    def switch_mode(self, session: Session, mode_id: str, *, field: str = "modeId") -> None:
        """Switch the permission mode (``field``: where the params named it, for the error)."""
        if mode_id not in MODES:
            raise invalid_params(f'unknown mode "{mode_id}"; one of {list(MODES)}', field)
        session.record(ModeChanged(mode_id))

    async def switch_model(self, session: Session, model_id: str) -> None:
        choice = next((m for m in self.config.models if m.id == model_id), None)
        if choice is None:
            known = [m.id for m in self.config.models]
            raise invalid_params(f'unknown model "{model_id}"; one of {known}', "value")
        if choice.id != session.model_id:
            session.record(ConfigChanged(model_id=choice.id))
            await session.set_model(choice.new_model())

    async def set_option(self, session: Session, config_id: str, value: Any) -> None:
        """One config option changed from the editor (any but the mode, which has its own update)."""
        if config_id == "model" and isinstance(value, str) and self.config.models:
            await self.switch_model(session, value)
        elif (
            config_id == EFFORT_OPTION
            and isinstance(value, str)
            and value in efforts(session, self.config.models)
        ):
            session.record(ConfigChanged(reasoning_effort=value))  # the next model request carries it
        elif (
            config_id == REASONING_OPTION
            and isinstance(value, bool)
            and self._sessions.profile.boolean_options
        ):
            session.record(ConfigChanged(show_reasoning=value))
        else:
            raise invalid_params(f'no config option "{config_id}" takes {value!r}', "value")

    def in_step(self, session: Session, *, mode: bool, options: bool) -> Callable[[], Awaitable[None]]:
        """Keep the editor's pickers in step after a change: the mode, the complete option list."""

        async def send() -> None:
            dialect = session.dialect
            changed = dialect.mode_changed(session.permissions.mode) if mode else None
            if changed is not None:
                await session.send(changed)
            if options:  # (v2 has no mode update: a change from the options is in their answer)
                await session.send(dialect.config_options(self.options(session)))

        return send

"""Where a session's model comes from: the command line's model inputs, resolved again for each
session, and the OpenAI-compatible model built from the settings they give.

Apart from ``_settings`` (which resolves settings and knows nothing of the model built from them)
so that the model client can read its settings without the two importing each other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ._settings import (
    ModelSettings,
    SettingsError,
    default_config_path,
    missing_key_message,
    resolve_model_settings,
)

if TYPE_CHECKING:
    from ._openai import OpenAIModel

__all__ = ["ModelSource", "build_openai_model"]

_NO_MODEL_HELP: Final = "pass --model openai:NAME, set DSH_MODEL, or set model in the config file"


def build_openai_model(settings: ModelSettings) -> OpenAIModel:
    """An ``OpenAIModel`` for these settings (cheap: the HTTP client loads at the first request)."""
    from ._openai import OpenAIModel

    return OpenAIModel(settings)


@dataclass(frozen=True)
class ModelSource:
    """The CLI's inputs, re-resolved on demand: each session (and each ``authenticate``) reads
    the config file again, so a key stored by ``dsh-acp login`` needs no restart."""

    cli_model: str | None = None
    cli_base_url: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False)
    config_path: Path | None = None
    build: Callable[[ModelSettings], OpenAIModel] = build_openai_model
    _last: list[ModelSettings] = field(default_factory=list, init=False, compare=False, repr=False)
    """The settings the last resolution gave: one object that sessions with the same settings
    share (each session resolves them again, and a copy per session was half of an idle
    session's memory)."""

    @classmethod
    def from_process(cls, cli_model: str | None, cli_base_url: str | None) -> ModelSource:
        """The process environment and the default config file."""
        environ = dict(os.environ)
        return cls(cli_model, cli_base_url, environ, default_config_path(environ))

    def settings(self) -> ModelSettings | None:
        """The settings now (raises ``SettingsError`` for a broken configuration)."""
        return resolve_model_settings(self.cli_model, self.cli_base_url, self.environ, self.config_path)

    def model(self) -> OpenAIModel:
        """A new model for a session (``AgentConfig.model``); the settings must name one."""
        settings = self.settings()
        if settings is None:
            raise SettingsError("no model is configured: " + _NO_MODEL_HELP)
        if self._last and self._last[0] == settings:
            settings = self._last[0]
        else:
            self._last[:] = [settings]
        return self.build(settings)

    def missing_key(self) -> str | None:
        """``missing_key_message`` for the settings now; a broken config file is reported too."""
        try:
            return missing_key_message(self.settings())
        except SettingsError as error:
            return str(error)

"""Session config options: the model picker and the mode picker an editor shows (ACP
``configOptions``), and a boolean option for clients that advertise them."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_acp._config import ModelChoice
from dsh_acp.permissions._modes import MODES
from dsh_acp.session._session import Session
from dsh_acp.wire._updates import ConfigOption, SelectChoice

__all__ = ["EFFORT_OPTION", "REASONING_OPTION", "config_options", "efforts"]

REASONING_OPTION = "show_reasoning"
EFFORT_OPTION = "reasoning_effort"
_EFFORT_NAMES = {"low": "Low", "medium": "Medium", "high": "High"}


def efforts(session: Session, models: Sequence[ModelChoice]) -> tuple[str, ...]:
    """The reasoning efforts the session's model takes (empty: no effort picker)."""
    choice = next((m for m in models if m.id == session.model_id), models[0] if models else None)
    return choice.efforts if choice is not None else ()


def _model_choice(model: ModelChoice) -> SelectChoice:
    choice: SelectChoice = {"value": model.id, "name": model.name}
    if model.description:
        choice["description"] = model.description
    return choice


def config_options(session: Session, models: Sequence[ModelChoice], *, boolean: bool) -> list[ConfigOption]:
    """The complete option list of a session, as every answer and update carries it (``boolean``:
    whether the client shows boolean options)."""
    options: list[ConfigOption] = []
    if models:
        options.append(
            {
                "id": "model",
                "name": "Model",
                "category": "model",
                "type": "select",
                "currentValue": session.model_id or models[0].id,
                "options": [_model_choice(m) for m in models],
            }
        )
    options.append(
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": session.permissions.mode,
            "options": [
                {"value": mode_id, "name": name, "description": description}
                for mode_id, (name, description) in MODES.items()
            ],
        }
    )
    levels = efforts(session, models)
    if levels:
        options.append(
            {
                "id": EFFORT_OPTION,
                "name": "Reasoning effort",
                "description": "How hard the model thinks before it answers (from the next request)",
                "category": "thought_level",
                "type": "select",
                "currentValue": session.effort or ("medium" if "medium" in levels else levels[0]),
                "options": [{"value": level, "name": _EFFORT_NAMES.get(level, level)} for level in levels],
            }
        )
    if boolean:
        options.append(
            {
                "id": REASONING_OPTION,
                "name": "Show reasoning",
                "description": "Stream the model's reasoning as thoughts",
                "type": "boolean",
                "currentValue": session.show_reasoning,
            }
        )
    return options

"""Session config options: the model picker and the mode picker an editor shows (ACP
``configOptions``), and a boolean option for clients that advertise them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._config import ModelChoice
from ._modes import MODES
from ._session import Session

__all__ = ["REASONING_OPTION", "boolean_options_supported", "config_options"]

REASONING_OPTION = "show_reasoning"


def boolean_options_supported(client_capabilities: Mapping[str, Any]) -> bool:
    """Whether the client advertised ``session.configOptions.boolean``."""
    session = client_capabilities.get("session")
    options = session.get("configOptions") if isinstance(session, Mapping) else None
    return isinstance(options, Mapping) and isinstance(options.get("boolean"), Mapping)


def config_options(
    session: Session, models: Sequence[ModelChoice], client_capabilities: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The complete option list of a session, as every answer and update carries it."""
    options: list[dict[str, Any]] = []
    if models:
        options.append(
            {
                "id": "model",
                "name": "Model",
                "category": "model",
                "type": "select",
                "currentValue": session.model_id or models[0].id,
                "options": [
                    {
                        "value": m.id,
                        "name": m.name,
                        **({"description": m.description} if m.description else {}),
                    }
                    for m in models
                ],
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
    if boolean_options_supported(client_capabilities):
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

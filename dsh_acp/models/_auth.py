"""The ``authMethods`` the agent offers, built without the model settings (on the way to the
``initialize`` answer, which an editor waits for).

Every client gets at least one method (the ACP registry's verifier, and CodeCompanion, which
calls ``authenticate`` with the first method whenever there is one): ``api-key``, handled by the
agent, which succeeds when the agent has what its model needs. A client that can run a command
in a terminal also gets ``dsh-acp login`` (it asks for the provider, the model and the key):
as a ``terminal`` method when it advertises ``auth.terminal``, and under
``_meta["terminal-auth"]`` (the absolute command, as older clients and the registry expect)
when it advertises ``_meta["terminal-auth"]``.
"""

from __future__ import annotations

import sys
from typing import Any, Final

__all__ = ["API_KEY_AUTH_METHOD", "API_KEY_HELP", "LOGIN_AUTH_METHOD", "NO_MODEL_HELP", "auth_methods"]

API_KEY_AUTH_METHOD: Final = "api-key"
"""The agent-handled auth method: ``authenticate`` succeeds when the model has what it needs."""
LOGIN_AUTH_METHOD: Final = "login"
"""The terminal auth method: the client runs ``dsh-acp login`` in a terminal."""

API_KEY_HELP: Final = (
    "Set DSH_API_KEY (or OPENAI_API_KEY / DEEPSEEK_API_KEY) in the agent's environment, "
    "or run `dsh-acp login` to store a key in the user config file"
)
"""What to do to configure a key: the ``api-key`` auth method's description."""

NO_MODEL_HELP: Final = (
    "No model is configured: run `dsh-acp login` in a terminal (it asks for a provider, a model "
    "and a key), or start dsh-acp with --model openai:NAME"
)
"""What to do when no model is configured at all."""


def auth_methods(*, has_model: bool, terminal_login: bool, meta_terminal_login: bool) -> list[dict[str, Any]]:
    """The ``authMethods`` of the ``initialize`` answer (never empty)."""
    methods: list[dict[str, Any]] = [
        {
            "id": API_KEY_AUTH_METHOD,
            "name": "API key" if has_model else "Set up a model",
            "description": (API_KEY_HELP if has_model else NO_MODEL_HELP) + ".",
        }
    ]
    if not (terminal_login or meta_terminal_login):
        return methods
    login: dict[str, Any] = {
        "id": LOGIN_AUTH_METHOD,
        "name": "Log in with an API key" if has_model else "Choose a model and log in",
        "description": "Asks for the provider, the model and the key in a terminal and stores them in "
        "the user config file (mode 0600).",
    }
    if terminal_login:  # ACP's terminal method: only to clients that advertise auth.terminal
        login = {"type": "terminal", **login, "args": ["login"]}
    if meta_terminal_login:
        command = [sys.executable, "-m", "dsh_acp", "login"]
        login["_meta"] = {
            "terminal-auth": {"command": command[0], "args": command[1:], "label": "dsh-acp login"}
        }
    methods.append(login)
    return methods

"""Normalizing an agent's stdout into a golden transcript."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

__all__ = ["Normalizer"]


class Normalizer:
    """Rewrites what varies between runs, and only that.

    JSON-RPC ids are renumbered per direction (responses carry the client's ids, requests the
    agent's); the temp cwd becomes ``{{cwd}}``, the folder around it ``{{root}}``, and session
    ids ``{{sessionId}}``, ``{{sessionId2}}``… in order of appearance; the interpreter running the
    agent becomes ``{{python}}`` and the folder the packages are installed in ``{{packages}}`` (a
    command in the client's terminal runs through a script there), and a scenario site's
    ``host:port`` ``{{site}}``.

    Unless ``pin_agent``, what describes the agent itself rather than what a scenario's tools did
    is left out too, so that a golden survives an upgrade of dsh-acp: its version
    (``{{version}}``), its capabilities and auth methods, the list of modes and each picker's
    choices (the current mode and values stay), and the slash commands (``{{commands}}``).
    Nothing else is hidden.
    """

    def __init__(
        self,
        cwd_aliases: Iterable[str],
        root_aliases: Iterable[str] = (),
        *,
        site: str | None = None,
        pin_agent: bool = False,
    ) -> None:
        self.pin_agent = pin_agent
        # Longest first, so /private/tmp/x wins over /tmp/x on macOS.
        self._cwds = sorted({alias.rstrip("/") for alias in cwd_aliases if alias}, key=len, reverse=True)
        self._roots = sorted({alias.rstrip("/") for alias in root_aliases if alias}, key=len, reverse=True)
        self._places = _install_places() + ([(site, "{{site}}")] if site else [])
        self._sessions: dict[str, str] = {}
        self._client_ids: dict[Any, int] = {}
        self._agent_ids: dict[Any, int] = {}

    def add_session(self, session_id: str) -> None:
        """Name a session id (the first is ``{{sessionId}}``, then ``{{sessionId2}}``…)."""
        if session_id not in self._sessions:
            n = len(self._sessions) + 1
            self._sessions[session_id] = "{{sessionId}}" if n == 1 else f"{{{{sessionId{n}}}}}"

    def _string(self, value: str) -> str:
        for place, name in self._places:
            if place in value:
                value = value.replace(place, name)
        for cwd in self._cwds:
            if cwd in value:
                value = value.replace(cwd, "{{cwd}}")
        for root in self._roots:  # what lies beside the workspace (its parent folder)
            if root in value:
                value = value.replace(root, "{{root}}")
        if value in self._sessions:
            return self._sessions[value]
        for session_id, name in self._sessions.items():
            if session_id in value:
                value = value.replace(session_id, name)
        return value

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, dict):
            return {self._string(key): self._value(item) for key, item in value.items()}
        return value

    @staticmethod
    def _renumber(table: dict[Any, int], request_id: Any) -> int:
        if request_id not in table:
            table[request_id] = len(table)
        return table[request_id]

    def client_id(self, request_id: Any) -> None:
        """Note a request id the client used (in sending order)."""
        self._renumber(self._client_ids, request_id)

    def message(self, message: Any) -> Any:
        """One agent message, normalized."""
        if not isinstance(message, Mapping):
            return self._value(message)
        out = dict(message)
        if "id" in out and out["id"] is not None:
            if "method" in out:
                out["id"] = self._renumber(self._agent_ids, out["id"])
            else:
                out["id"] = self._renumber(self._client_ids, out["id"])
        params = out.get("params")
        if out.get("method") == "$/cancel_request" and isinstance(params, Mapping):
            out["params"] = {**params, "requestId": self._renumber(self._agent_ids, params.get("requestId"))}
        if not self.pin_agent:
            _leave_out_the_agent(out)
        return self._value(out)

    def line(self, message: Any) -> str:
        """One golden line: the normalized message as compact JSON."""
        return orjson.dumps(self.message(message)).decode()


def _install_places() -> list[tuple[str, str]]:
    """Where this installation lives, which differs between machines (longest first): the
    interpreter, and the folder the packages are installed in (a command in the client's
    terminal runs through a script of ``reference_tools`` there)."""
    packages = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../dsh_acp/testing
    places = {sys.executable: "{{python}}", os.path.dirname(packages): "{{packages}}"}
    return sorted(places.items(), key=lambda item: len(item[0]), reverse=True)


def _pickers(options: Any) -> Any:
    """Config options with their choices left out: the current value stays, the list is the agent's."""
    if not isinstance(options, list):
        return options
    return [
        {key: value for key, value in option.items() if key not in ("options", "name", "description")}
        if isinstance(option, Mapping)
        else option
        for option in options
    ]


def _leave_out_the_agent(message: dict[str, Any]) -> None:
    """What describes dsh-acp itself, replaced by placeholders (see ``Normalizer``)."""
    result = message.get("result")
    if isinstance(result, Mapping):
        result = message["result"] = dict(result)
        for key in ("agentInfo", "info"):  # v2 names the agent's ``info``, its ``capabilities``
            info = result.get(key)
            if isinstance(info, Mapping) and "version" in info:
                result[key] = {**info, "version": "{{version}}"}
        for key, placeholder in (
            ("agentCapabilities", "{{agentCapabilities}}"),
            ("capabilities", "{{capabilities}}"),
            ("authMethods", "{{authMethods}}"),
            ("availableCommands", "{{commands}}"),  # v2 gives a session's commands in its answers
        ):
            if key in result:
                result[key] = placeholder
        modes = result.get("modes")
        if isinstance(modes, Mapping) and "availableModes" in modes:
            result["modes"] = {**modes, "availableModes": "{{modes}}"}
        if "configOptions" in result:
            result["configOptions"] = _pickers(result["configOptions"])
    params = message.get("params")
    update = params.get("update") if isinstance(params, Mapping) else None
    if isinstance(update, Mapping) and isinstance(params, Mapping):
        kind = update.get("sessionUpdate")
        if kind == "available_commands_update":
            message["params"] = {**params, "update": {**update, "availableCommands": "{{commands}}"}}
        elif kind == "config_option_update":
            message["params"] = {
                **params,
                "update": {**update, "configOptions": _pickers(update.get("configOptions"))},
            }

"""Normalizing an agent's stdout into a golden transcript, and showing how two differ."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["Normalizer", "golden_diff"]


class Normalizer:
    """Rewrites what varies between runs, and only that.

    JSON-RPC ids are renumbered per direction (responses carry the client's ids, requests the
    agent's); the temp cwd becomes ``{{cwd}}``, the folder around it ``{{root}}``, and session
    ids ``{{sessionId}}``, ``{{sessionId2}}``… in order of appearance; the interpreter running the
    agent becomes ``{{python}}`` and the folder the packages are installed in ``{{packages}}`` (a
    command in the client's terminal runs through a script there), and a scenario site's
    ``host:port`` ``{{site}}``. Nothing else is hidden.
    """

    def __init__(
        self, cwd_aliases: Iterable[str], root_aliases: Iterable[str] = (), *, site: str | None = None
    ) -> None:
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
        return self._value(out)

    def line(self, message: Any) -> str:
        """One golden line: the normalized message as compact JSON."""
        return orjson.dumps(self.message(message)).decode()


def _install_places() -> list[tuple[str, str]]:
    """Where this installation lives, which differs between machines (longest first): the
    interpreter, and the folder the packages are installed in (a command in the client's
    terminal runs through a script of ``reference_tools`` there)."""
    import os
    import sys

    packages = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../dsh_acp/testing
    places = {sys.executable: "{{python}}", os.path.dirname(packages): "{{packages}}"}
    return sorted(places.items(), key=lambda item: len(item[0]), reverse=True)


def golden_diff(expected: Sequence[str], actual: Sequence[str], name: str) -> str:
    """A unified diff of two transcripts, one message per line, pretty enough to read in a terminal."""
    return "".join(
        difflib.unified_diff(
            [line + "\n" for line in expected],
            [line + "\n" for line in actual],
            fromfile=f"{name}/expected.jsonl",
            tofile=f"{name} (this run)",
        )
    )

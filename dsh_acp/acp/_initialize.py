"""The answer to ``initialize``: what the agent can do, and what it learns of the client.

An editor shows nothing until this answer arrives, so it is made from the configuration alone,
without anyio, pydantic, the tools or the model: on stdio it is written before the rest of the
agent is even imported (by ``dsh_acp.rpc._prelude``). One ``Handshake`` answers for the prelude
and then for the agent, so the answer cannot depend on which of them gave it.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from dsh_acp._config import AgentConfig
from dsh_acp._version import VERSION
from dsh_acp.models._auth import auth_methods
from dsh_acp.rpc._errors import INVALID_REQUEST, RpcError, invalid_params
from dsh_acp.wire._client_profile import ClientProfile, TerminalsChoice, client_profile
from dsh_acp.wire.v2._handshake import client_profile as v2_profile
from dsh_acp.wire.v2._handshake import initialize_result
from dsh_tools._sandbox_support import sandbox_support  # the probe alone: no tools, no pydantic

__all__ = ["PROTOCOL_VERSION", "PROTOCOL_VERSIONS", "Handshake", "initialize_answer", "sandbox_meta"]

_log = logging.getLogger("dsh_acp.sandbox")
_said: list[bool] = []

PROTOCOL_VERSIONS = (1, 2)
"""The ACP versions this agent speaks: 1, and the v2 draft of the pinned SDK."""
PROTOCOL_VERSION = PROTOCOL_VERSIONS[-1]
"""The newest: what a client asking for a version this agent does not know is answered."""


def initialize_answer(config: AgentConfig, params: Any) -> tuple[dict[str, Any], ClientProfile]:
    """The result of ``initialize`` and the client's profile; ``RpcError`` for invalid params."""
    if not isinstance(params, dict):
        raise invalid_params("initialize takes an object", kind="dict_type")
    version = params.get("protocolVersion")
    if type(version) is str:
        # A version that is not a number (some clients send "1", or a date) is version 0, the
        # Rust reference library's rule: we answer with ours and the client decides.
        version = 0
    if type(version) is not int or not 0 <= version <= 65535:
        raise invalid_params("protocolVersion must be an integer from 0 to 65535", "protocolVersion")
    if version >= 2:  # 2, or one newer than this agent knows: its newest, never the number echoed
        return _v2_answer(config, params)
    terminals = cast(TerminalsChoice, config.terminals)
    profile = client_profile(params.get("clientCapabilities"), params.get("clientInfo"), terminals)
    durable = config.state_dir is not None
    result = {
        # Version 1, or below it (0, a string): the client decides.
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": durable,
            "promptCapabilities": {
                "image": any(choice.accepts_images for choice in config.models[:1]),
                "audio": False,
                "embeddedContext": True,
            },
            # Stdio servers always; http too (dsh_acp.mcp._servers.HTTP_SUPPORTED, checked by a test).
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {
                "close": {},
                "additionalDirectories": {},
                # ``fork`` is an unstable v1 capability (the official schema.unstable.json).
                **({"list": {}, "resume": {}, "delete": {}, "fork": {}} if durable else {}),
            },
            # A stored key (``dsh-acp login``) can be cleared: only with a real model.
            **({"auth": {"logout": {}}} if config.model_source is not None else {}),
            # A prompt sent while a turn runs is queued, not refused. There is no ACP field for
            # this yet; clients look for the key claude-agent-acp introduced, so both are set.
            # And whether commands run in the OS sandbox (no ACP field either).
            "_meta": {
                "promptQueueing": True,
                "claudeCode": {"promptQueueing": True},
                "sandbox": sandbox_meta(config),
            },
        },
        "authMethods": _auth_methods(config, profile),
        "agentInfo": {"name": "dsh-acp", "title": "dsh-acp", "version": VERSION},
    }
    return result, profile


def sandbox_meta(config: AgentConfig) -> dict[str, object]:
    """What ``initialize`` says of the sandbox under commands; the first time, the log says it too."""
    support = sandbox_support(config.sandbox)
    if not _said:
        _said.append(True)
        if support.available:
            _log.info("commands run in the sandbox (%s)", support.detail)
        else:
            _log.warning(
                "no sandbox for commands: %s; the approval rules are the only wall "
                "(auto mode asks as default does)",
                support.detail,
            )
    return support.meta()


def _v2_answer(config: AgentConfig, params: dict[str, Any]) -> tuple[dict[str, Any], ClientProfile]:
    """A client speaking v2 (or newer): the v2 answer, and what it reads of the client."""
    profile = v2_profile(params.get("capabilities"))
    result = initialize_result(
        images=any(choice.accepts_images for choice in config.models[:1]),
        durable=config.state_dir is not None,
        auth_methods=_auth_methods(config, profile),
        agent_info={"name": "dsh-acp", "title": "dsh-acp", "version": VERSION},
        meta={"sandbox": sandbox_meta(config)},  # whether commands run in the OS sandbox
    )
    return result, profile


def _auth_methods(config: AgentConfig, profile: ClientProfile) -> list[dict[str, Any]]:
    return auth_methods(
        has_model=bool(config.models),
        terminal_login=profile.terminal_login,
        meta_terminal_login=profile.meta_terminal_login,
    )


class Handshake:
    """A connection's ``initialize``: its answers, and what they settled (the client's profile, the
    ACP version). On stdio the prelude answers the first ``initialize`` with it, then hands it to
    the agent, which answers any later one with it."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.profile = ClientProfile()
        """What the client can show, read from the last ``initialize`` answered."""
        self.negotiated = False
        """Whether an ``initialize`` was answered: the connection's ACP version is then set."""

    def answer(self, params: Any) -> dict[str, Any]:
        """The result of ``initialize``; ``RpcError`` for invalid params, and for a version other
        than the one an earlier ``initialize`` settled."""
        result, profile = initialize_answer(self.config, params)
        if self.negotiated and profile.protocol != self.profile.protocol:
            # The connection's sessions, their answers and their updates are of one version.
            raise RpcError(
                INVALID_REQUEST,
                f"Invalid request: this connection speaks ACP version {self.profile.protocol}; "
                "initialize again cannot change it",
            )
        self.profile, self.negotiated = profile, True
        return result

    def prelude_answer(self, method: str, params: Any) -> dict[str, Any] | None:
        """The prelude's answerer: ``answer`` for an ``initialize`` it accepts; ``None`` for
        anything else, which the full connection then answers (a refusal with ``answer`` too)."""
        if method != "initialize":
            return None
        try:
            return self.answer(params)
        except RpcError:
            return None

"""The ACP agent's front door: method routing, and ``initialize`` answered on the light path.

An editor waits for ``initialize`` before it shows anything, so answering it must not wait for
pydantic, the tools or the model: this module imports none of them. Every other method is
delegated to ``_session_methods.SessionMethods``, imported on first use (and warmed up on the
loop right after ``initialize`` so that ``session/new`` does not pay for it either).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, cast

import anyio.lowlevel
from anyio.abc import TaskGroup

from dsh_acp._config import VERSION, AgentConfig
from dsh_acp.rpc._connection import METHOD_NOT_FOUND, Connection, Reply, RequestId, RpcError, invalid_params

from ._client_profile import ClientProfile, TerminalsChoice, client_profile

if TYPE_CHECKING:
    from ._session_methods import SessionMethods

__all__ = ["PROTOCOL_VERSION", "Agent"]

PROTOCOL_VERSION = 1
"""The newest (and only) ACP version this agent speaks."""

_log = logging.getLogger("dsh_acp.agent")


class Agent:
    """The ``Dispatcher`` of an ACP agent connection."""

    def __init__(self, config: AgentConfig, background: TaskGroup) -> None:
        self.config = config
        self.background = background
        self.profile = ClientProfile()
        """What the client can show, read from ``initialize``."""
        self._connection: Connection | None = None
        self._methods: SessionMethods | None = None
        self._warmed = False

    def attach(self, connection: Connection) -> None:
        """Give the agent the connection it answers on (the two refer to each other)."""
        self._connection = connection

    @property
    def methods(self) -> SessionMethods:
        """The handlers of every method but ``initialize``, built on first use."""
        if self._methods is None:
            from ._session_methods import SessionMethods

            assert self._connection is not None, "attach() a connection first"
            self._methods = SessionMethods(self.config, self._connection, self.background, self.profile)
        return self._methods

    # -- Dispatcher -------------------------------------------------------------------------

    def on_request(self, method: str, params: Any, request_id: RequestId) -> Awaitable[Any]:
        if method == "initialize":
            return _ready(Reply(self._initialize(params), self._warm_up))
        if method.startswith("_"):  # an extension method we do not know: no need to load the rest
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return self.methods.on_request(method, params)

    def on_notification(self, method: str, params: Any) -> Awaitable[None] | None:
        if method == "session/cancel":
            self.methods.cancel(params)
        return None  # unknown notifications (custom `_x` ones included) are ignored

    async def aclose(self) -> None:
        """Cancel every turn and release every session (stdin closed, or shutting down)."""
        if self._methods is not None:
            await self._methods.aclose()

    # -- initialize ---------------------------------------------------------------------------

    def _initialize(self, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise invalid_params("initialize takes an object", kind="dict_type")
        version = params.get("protocolVersion")
        if type(version) is str:
            # A version that is not a number (some clients send "1", or a date) is version 0, the
            # Rust reference library's rule: we answer with ours and the client decides.
            version = 0
        if type(version) is not int or not 0 <= version <= 65535:
            raise invalid_params("protocolVersion must be an integer from 0 to 65535", "protocolVersion")
        terminals = cast(TerminalsChoice, self.config.terminals)
        self.profile = client_profile(params.get("clientCapabilities"), params.get("clientInfo"), terminals)
        if self._methods is not None:
            self._methods.profile = self.profile
        durable = self.config.state_dir is not None
        return {
            # We speak only version 1: an unknown (newer) version is answered with ours, never echoed.
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": durable,
                "promptCapabilities": {
                    "image": any(choice.accepts_images for choice in self.config.models[:1]),
                    "audio": False,
                    "embeddedContext": True,
                },
                # Stdio servers always; http too (dsh_acp.mcp._servers.HTTP_SUPPORTED, checked by a test).
                "mcpCapabilities": {"http": True, "sse": False},
                "sessionCapabilities": {
                    "close": {},
                    "additionalDirectories": {},
                    **({"list": {}, "resume": {}, "delete": {}} if durable else {}),
                },
                # A stored key (``dsh-acp login``) can be cleared: only with a real model.
                **({"auth": {"logout": {}}} if self.config.model_source is not None else {}),
                # A prompt sent while a turn runs is queued, not refused. There is no ACP field for
                # this yet; clients look for the key claude-agent-acp introduced, so both are set.
                "_meta": {"promptQueueing": True, "claudeCode": {"promptQueueing": True}},
            },
            "authMethods": self._auth_methods(),
            "agentInfo": {"name": "dsh-acp", "title": "dsh-acp", "version": VERSION},
        }

    def _auth_methods(self) -> list[dict[str, Any]]:
        if self.config.model_source is None:
            return []
        from dsh_acp.models._settings import auth_methods

        return auth_methods(terminal_login=self.profile.terminal_login)

    async def _warm_up(self) -> None:
        """Once ``initialize`` is answered, load what sessions need while the editor digests the
        answer (on the loop rather than in a thread: a thread costs memory and gains nothing
        here, the next request needs these modules anyway)."""
        if self._methods is not None or self._warmed:
            return
        self._warmed = True
        await anyio.lowlevel.checkpoint()  # let the answer reach the pipe first
        for module in ("dsh_acp.acp._session_methods", *self.config.warm_imports):
            try:
                importlib.import_module(module)
            except Exception:  # the real import, on first use, reports it properly
                _log.debug("warm-up import of %s failed", module, exc_info=True)


async def _ready(value: Any) -> Any:
    return value

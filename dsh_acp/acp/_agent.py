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
from typing import TYPE_CHECKING, Any

import anyio.lowlevel
from anyio.abc import TaskGroup

from dsh_acp._config import AgentConfig
from dsh_acp.rpc._connection import Connection, Reply, RequestId
from dsh_acp.rpc._errors import METHOD_NOT_FOUND, RpcError
from dsh_acp.wire._client_profile import ClientProfile

from ._initialize import PROTOCOL_VERSION, Handshake

if TYPE_CHECKING:
    from ._session_methods import SessionMethods

__all__ = ["PROTOCOL_VERSION", "Agent"]

_log = logging.getLogger("dsh_acp.agent")


class Agent:
    """The ``Dispatcher`` of an ACP agent connection."""

    def __init__(
        self, config: AgentConfig, background: TaskGroup, handshake: Handshake | None = None
    ) -> None:
        """``handshake``: the one the prelude answered ``initialize`` with, on stdio (the agent then
        warms up as after its own answer)."""
        self.config = config
        self.background = background
        self.handshake = handshake or Handshake(config)
        self._connection: Connection | None = None
        self._methods: SessionMethods | None = None
        self._warmed = False
        if self.handshake.negotiated:
            background.start_soon(self._warm_up, name="warm-up after initialize")

    @property
    def profile(self) -> ClientProfile:
        """What the client can show, read from ``initialize``."""
        return self.handshake.profile

    def attach(self, connection: Connection) -> None:
        """Give the agent the connection it answers on (the two refer to each other)."""
        self._connection = connection

    @property
    def methods(self) -> SessionMethods:
        """The handlers of every method but ``initialize``, built on first use."""
        if self._methods is None:
            from ._session_methods import SessionMethods  # not on the way to initialize

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

    def holds(self, session_id: str) -> bool:
        """Whether the session is open on this connection."""
        return self._methods is not None and session_id in self._methods.sessions.sessions

    async def release(self, session_id: str) -> None:
        """Close a session open here, for another connection to open it: its turns are cancelled
        (each prompt answers ``cancelled``), its log synced and its claim dropped."""
        if self._methods is not None and self.holds(session_id):
            await self._methods.sessions.close(session_id)

    # -- initialize ---------------------------------------------------------------------------

    def _initialize(self, params: Any) -> dict[str, Any]:
        result = self.handshake.answer(params)
        if self._methods is not None:
            self._methods.profile = self.profile
        return result

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

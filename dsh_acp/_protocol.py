"""The session half of the agent: ``session/*`` methods, sessions and their prompt turns."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from dsh_tools import AudioBlock, ContentBlock, ImageBlock, Services, ToolRegistry

from ._bridge import RenderContext
from ._coalesce import CoalescePolicy
from ._config import AgentConfig
from ._connection import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Connection,
    RpcError,
)
from ._model import ModelAuthError, ModelError, UserMessage
from ._scripted import ScriptExhausted
from ._session import Session, SessionIO, Turn
from ._turn import LoopSettings, StopReason, TurnRunner
from ._wire import (
    AuthenticateParams,
    NewSessionParams,
    PromptParams,
    SessionIdParams,
)

__all__ = ["NO_MODEL_MESSAGE", "Protocol"]

_log = logging.getLogger("dsh_acp.protocol")

NO_MODEL_MESSAGE = (
    "No model is configured, so I cannot answer yet. Start dsh-acp with `--model script:PATH` "
    "(a scripted model, see the README) or `--model openai:<name>` with an API key."
)

Handler = Callable[[Any], Awaitable[Any]]


def _validate(model: type[BaseModel], params: Any) -> Any:
    """Parse params at the boundary; failures become -32602 with the field errors as data."""
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as error:
        errors = error.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"]) or "params"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: {where}: {first['msg']}{more}",
            {"errors": [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in errors]},
        ) from None


class Protocol:
    """Sessions of one connection and the ``session/*`` methods on them."""

    def __init__(
        self, config: AgentConfig, connection: Connection, client_capabilities: dict[str, Any]
    ) -> None:
        self.config = config
        self.connection = connection
        self.client_capabilities = client_capabilities
        self.sessions: dict[str, Session] = {}
        self.tools = ToolRegistry()
        for definition in config.tools() if config.tools else ():
            self.tools.register(definition)
        if config.configure_registry is not None:
            config.configure_registry(self.tools)
        self.settings = LoopSettings(
            max_model_requests=config.max_model_requests,
            coalesce=CoalescePolicy(max_bytes=config.coalesce_bytes, max_delay=config.coalesce_delay),
        )
        self._io = SessionIO(notify=connection.notify, request=connection.request)
        self._methods: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "authenticate": self._authenticate,
            "session/new": self._new_session,
            "session/close": self._close_session,
        }

    # -- routing ----------------------------------------------------------------------------

    def on_request(self, method: str, params: Any) -> Awaitable[Any]:
        """Route one request. Runs synchronously on the read loop: whatever must be registered
        before the next message is read (a prompt's turn) is registered here."""
        if method == "session/prompt":
            return self._start_prompt(params)
        handler = self._methods.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return handler(params)

    def cancel(self, params: Any) -> None:
        """``session/cancel``: stop the session's running turn, if any (unknown ids are ignored)."""
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None and session.turn is not None:
            session.turn.cancel()

    async def aclose(self) -> None:
        """Cancel every turn and close every session."""
        for session in list(self.sessions.values()):
            await session.aclose()
        self.sessions.clear()

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f'Resource not found: session "{session_id}"')
        return session

    # -- methods ----------------------------------------------------------------------------

    async def _authenticate(self, params: Any) -> dict[str, Any]:
        parsed: AuthenticateParams = _validate(AuthenticateParams, params)
        raise RpcError(INVALID_PARAMS, f'Invalid params: unknown auth method "{parsed.method_id}"')

    async def _new_session(self, params: Any) -> dict[str, Any]:
        parsed: NewSessionParams = _validate(NewSessionParams, params)
        if parsed.mcp_servers:
            _log.warning("MCP servers are not connected yet; ignoring %d", len(parsed.mcp_servers))
        session = self._make_session(self.config.session_ids(), parsed)
        self.sessions[session.session_id] = session
        return {"sessionId": session.session_id}

    def _make_session(self, session_id: str, parsed: NewSessionParams) -> Session:
        return Session(
            session_id=session_id,
            cwd=parsed.cwd,
            model=self.config.model() if self.config.model else None,
            registry=self.tools.layer(),
            services=Services(),
            render=RenderContext.for_client(parsed.cwd, self.client_capabilities),
            io=self._io,
            additional_directories=tuple(parsed.additional_directories),
            mcp_servers=list(parsed.mcp_servers),
        )

    async def _close_session(self, params: Any) -> dict[str, Any]:
        parsed: SessionIdParams = _validate(SessionIdParams, params)
        session = self._session(parsed.session_id)
        turn = session.turn
        if turn is not None:
            turn.cancel()
            with anyio.fail_after(10):
                await turn.done.wait()  # the prompt answers `cancelled` first
        self.sessions.pop(parsed.session_id, None)
        await session.aclose()
        return {}

    # -- prompts ----------------------------------------------------------------------------

    def _start_prompt(self, params: Any) -> Awaitable[dict[str, Any]]:
        parsed: PromptParams = _validate(PromptParams, params)
        session = self._session(parsed.session_id)
        if session.turn is not None:
            raise RpcError(
                INVALID_PARAMS, f'Invalid params: session "{session.session_id}" is already running a prompt'
            )
        if not parsed.prompt:
            raise RpcError(INVALID_PARAMS, "Invalid params: prompt is empty")
        for block in parsed.prompt:
            if isinstance(block, AudioBlock):
                raise RpcError(INVALID_PARAMS, "Invalid params: audio prompts are not supported")
            if isinstance(block, ImageBlock) and not self.config.model_accepts_images:
                raise RpcError(INVALID_PARAMS, "Invalid params: this model does not take images")
        turn = Turn()
        session.turn = turn  # registered before the next message is read: a cancel finds it
        return self._run_prompt(session, turn, tuple(parsed.prompt))

    async def _run_prompt(
        self, session: Session, turn: Turn, prompt: tuple[ContentBlock, ...]
    ) -> dict[str, Any]:
        runner = TurnRunner(session, self.settings, self.config.message_ids)
        stop: StopReason = "cancelled"
        try:
            with turn.scope:
                session.history.append(UserMessage(prompt))
                if session.model is None:
                    await self._explain_no_model(session)
                    stop = "end_turn"
                else:
                    stop = await runner.run()
            if turn.cancel_requested:
                stop = "cancelled"
                await runner.close_open_calls()
            return {"stopReason": stop}
        except ScriptExhausted as error:
            raise RpcError(INTERNAL_ERROR, str(error)) from None
        except ModelAuthError as error:
            raise RpcError(AUTH_REQUIRED, str(error)) from None
        except ModelError as error:
            raise RpcError(INTERNAL_ERROR, str(error)) from None
        except BaseException:
            # Cancelled from outside ($/cancel_request, shutdown): still close what is open.
            with anyio.CancelScope(shield=True):
                try:
                    await runner.close_open_calls()
                except Exception:
                    _log.debug("could not close open calls", exc_info=True)
            raise
        finally:
            if session.turn is turn:
                session.turn = None
            turn.done.set()

    async def _explain_no_model(self, session: Session) -> None:
        await session.send(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": NO_MODEL_MESSAGE},
                "messageId": self.config.message_ids(),
            }
        )

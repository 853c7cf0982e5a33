"""The ACP methods after ``initialize``: one table of them, and a thin handler for each that parses
its params and hands the work to the session manager, the prompt runner or the pickers.

Also the composition root of that half of the agent: what the handlers share is built here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from dsh_acp._config import AgentConfig
from dsh_acp.models._auth import API_KEY_AUTH_METHOD, LOGIN_AUTH_METHOD, NO_MODEL_HELP
from dsh_acp.rpc._connection import Connection, Reply
from dsh_acp.rpc._errors import AUTH_REQUIRED, INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError, invalid_params
from dsh_acp.session._session import SessionIO
from dsh_acp.wire._client_profile import ClientProfile
from dsh_acp.wire.v2._updates import state_idle, state_running

from ._pickers import SessionPickers
from ._session_manager import Replay, SessionManager, not_found
from ._session_params import SessionWhere, new_session_params
from ._slash_commands import CommandTable, available_commands

if TYPE_CHECKING:
    from dsh_acp.session._events import SessionEvent
    from dsh_acp.session._session import Session
    from dsh_acp.wire._client_params import (
        AuthenticateParams,
        ForkSessionParams,
        ListSessionsParams,
        LoadSessionParams,
        NewSessionParams,
        PromptParams,
        ResumeSessionParams,
        SessionIdParams,
        SetConfigOptionParams,
        SetModeParams,
    )

    from ._prompt_runner import PromptRunner

# The prompt runner (the agent loop, the bridge, the tools) and the pydantic models of the
# methods' params load on first use: an editor opens sessions it may never prompt, and an idle
# session is made without them (``session/new``'s plain params are read by ``new_session_params``).

__all__ = ["AGENT_METHODS", "METHODS", "Method", "SessionMethods"]

Answer = dict[str, Any] | Reply


@dataclass(frozen=True, slots=True)
class Method:
    """One ACP method: its handler, and when the agent offers it at all (a method it does not offer
    is answered ``Method not found``, as the capabilities in ``initialize`` announced)."""

    handler: Callable[[SessionMethods, Any], Awaitable[Answer]]
    """Called with the params parsed (``params``), as the next message waits: an async handler
    does its work when awaited."""
    params: str | None = None
    """The name of the params' model in ``dsh_acp.wire._client_params`` (``None``: none taken)."""
    light: Callable[[Any], Any] | None = None
    """A reader of the params' common shapes without the model (``None`` for the others)."""
    durable: bool = False
    """Only with a session store (``--state-dir``)."""
    login: bool = False
    """Only with a configured model API (there is a stored key to forget)."""
    protocols: frozenset[int] = frozenset({1, 2})
    """The ACP versions that have the method."""
    baseline_in: frozenset[int] = frozenset()
    """The versions in which every agent answers it, without a store too (v2's list and resume)."""


class SessionMethods:
    """The handlers of the methods in ``METHODS``, for one connection."""

    def __init__(
        self, config: AgentConfig, connection: Connection, background: TaskGroup, profile: ClientProfile
    ) -> None:
        self.config = config
        io = SessionIO(
            notify=connection.notify, notify_each=connection.notify_each, request=connection.request
        )
        self.sessions = SessionManager(config, io, background, profile, available_commands())
        self.pickers = SessionPickers(config, self.sessions)
        self._prompts: PromptRunner | None = None

    @property
    def prompts(self) -> PromptRunner:
        """The prompt turns of every session, made with the first prompt."""
        if self._prompts is None:
            from ._prompt_runner import prompt_runner  # see above

            self._prompts = prompt_runner(self.config, self.sessions, CommandTable(self.config, self.pickers))
        return self._prompts

    @property
    def profile(self) -> ClientProfile:
        """What the client can show (the agent replaces it if the client initializes again)."""
        return self.sessions.profile

    @profile.setter
    def profile(self, profile: ClientProfile) -> None:
        self.sessions.profile = profile

    def on_request(self, method: str, params: Any) -> Awaitable[Answer]:
        """Route one request. Runs synchronously on the read loop: whatever must be registered
        before the next message is read (a prompt's turn) is registered here."""
        entry = METHODS.get(method)
        if (
            entry is None
            or self.profile.protocol not in entry.protocols
            or (
                entry.durable
                and self.sessions.store is None
                and self.profile.protocol not in entry.baseline_in
            )
            or (entry.login and self.config.model_source is None)
        ):
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return entry.handler(self, _parsed(entry, params))

    def cancel(self, params: Any) -> None:
        """``session/cancel``: stop the session's running turn and drop its queued prompts (each
        answers ``cancelled``); unknown ids are ignored."""
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(session_id, str):
            self.sessions.cancel(session_id)

    async def aclose(self) -> None:
        """Cancel every turn and close every session."""
        await self.sessions.aclose()

    # -- the handlers -------------------------------------------------------------------------

    async def authenticate(self, parsed: AuthenticateParams) -> Answer:
        """Succeeds when the agent has what its model needs (a scripted or local model, a key):
        clients call it before anything else (CodeCompanion with the first method offered) and
        stop on an error. Else ``AUTH_REQUIRED`` saying what to do."""
        if parsed.method_id not in (API_KEY_AUTH_METHOD, LOGIN_AUTH_METHOD):
            raise invalid_params(f'unknown auth method "{parsed.method_id}"', "methodId")
        if not self.sessions.find_models():
            raise RpcError(AUTH_REQUIRED, NO_MODEL_HELP)
        self.sessions.require_key()
        return {}

    async def logout(self, params: None) -> Answer:
        """Forget the API key ``dsh-acp login`` stored (a key in the environment is the
        environment's: it stays, and the next session still finds it)."""
        source = self.config.model_source
        if source is not None and source.config_path is not None:  # else nothing is stored
            # The config file's reader and writer: not for an idle session.
            from dsh_acp.models._login import remove_api_key
            from dsh_acp.models._settings import SettingsError

            try:
                remove_api_key(source.config_path)
            except (SettingsError, OSError) as error:
                raise RpcError(INTERNAL_ERROR, f"cannot log out: {error}") from None
        return {}

    async def new_session(self, parsed: SessionWhere | NewSessionParams) -> Answer:
        session, failures = await self.sessions.create(parsed)
        answer = {"sessionId": session.session_id, **self.pickers.answer(session)}
        return Reply(answer, self.sessions.after_answer(session, failures))

    async def load_session(self, parsed: LoadSessionParams) -> Answer:
        """Reopen a stored session and replay it to the editor, then answer."""
        session, skipped, failures = await self.sessions.restore(parsed, _replay)
        after = self.sessions.after_answer(session, failures, skipped, restored=True)
        return Reply(self.pickers.answer(session), after)

    async def resume_session(self, parsed: ResumeSessionParams) -> Answer:
        """Reopen a stored session without replaying it (the editor still shows it). In v2 the
        client may ask for the replay (``replayFrom``: from the start, the one cursor there is),
        and is told the session's state after it, before the answer."""
        replay: Replay | None = None
        if self.profile.protocol == 2:
            if parsed.replay_from is not None and parsed.replay_from.get("type") != "start":
                kind = parsed.replay_from.get("type")
                raise invalid_params(
                    f"replayFrom {kind!r} is not a cursor this agent knows; use start", "replayFrom"
                )
            replay = _replay if parsed.replay_from is not None else None
            if self.sessions.store is None:  # v2's baseline: there is no stored session to find
                raise not_found(parsed.session_id, 2)
        session, skipped, failures = await self.sessions.restore(parsed, replay)
        if self.profile.protocol == 2:  # where the session is, after the replay and before the answer
            await session.send(state_running() if session.turn is not None else state_idle())
        after = self.sessions.after_answer(session, failures, skipped, restored=True)
        return Reply(self.pickers.answer(session), after)

    async def fork_session(self, parsed: ForkSessionParams) -> Answer:
        """A new session that starts with a stored session's history (not replayed: the editor
        already shows it), answered as ``session/new`` is."""
        session, skipped, failures = await self.sessions.fork(parsed)
        answer = {"sessionId": session.session_id, **self.pickers.answer(session)}
        return Reply(answer, self.sessions.after_answer(session, failures, skipped, restored=True))

    async def list_sessions(self, parsed: ListSessionsParams) -> Answer:
        if self.sessions.store is None:  # v2's baseline (v1 does not offer it without a store)
            return {"sessions": []}
        return self.sessions.page(parsed.cwd, parsed.cursor)

    async def close_session(self, parsed: SessionIdParams) -> Answer:
        await self.sessions.close(parsed.session_id)
        return {}

    async def delete_session(self, parsed: SessionIdParams) -> Answer:
        await self.sessions.delete(parsed.session_id)
        return {}

    async def set_mode(self, parsed: SetModeParams) -> Answer:
        session = self.sessions.get(parsed.session_id)
        self.pickers.switch_mode(session, parsed.mode_id)
        return Reply({}, self.pickers.in_step(session, mode=False, options=True))

    async def set_config_option(self, parsed: SetConfigOptionParams) -> Answer:
        session = self.sessions.get(parsed.session_id)
        if parsed.config_id == "mode" and isinstance(parsed.value, str):
            self.pickers.switch_mode(session, parsed.value, field="value")
            answer = {"configOptions": self.pickers.options_answer(session)}
            return Reply(answer, self.pickers.in_step(session, mode=True, options=False))
        await self.pickers.set_option(session, parsed.config_id, parsed.value)
        return {"configOptions": self.pickers.options_answer(session)}

    def prompt(self, parsed: PromptParams) -> Awaitable[Answer]:
        # Not async: the turn is registered before the next message is read.
        return self.prompts.start(parsed)


def _parsed(entry: Method, params: Any) -> Any:
    """The params as ``entry``'s handler takes them: read by its model (``RpcError`` when they do
    not fit), or by its light reader when that knows their shape."""
    if entry.params is None:
        return None
    if entry.light is not None and (light := entry.light(params)) is not None:
        return light
    from dsh_acp.wire import _client_params  # see above

    return _client_params.parse_params(getattr(_client_params, entry.params), params)


async def _replay(session: Session, events: Iterable[SessionEvent]) -> None:
    """Send the editor the updates that replay ``events``, each as it is made."""
    from dsh_acp.session._replay import replay_updates  # pydantic: not for an idle session

    session_id = session.session_id
    updates = replay_updates(events, session.render, session.registry)
    await session.io.notify_each(
        "session/update", ({"sessionId": session_id, "update": update} for update in updates)
    )


_V1 = frozenset({1})
_V2 = frozenset({2})

METHODS: dict[str, Method] = {
    "authenticate": Method(SessionMethods.authenticate, "AuthenticateParams", protocols=_V1),
    "logout": Method(SessionMethods.logout, login=True, protocols=_V1),
    # v2 ties both to a non-empty ``authMethods``, which this agent always offers.
    "auth/login": Method(SessionMethods.authenticate, "AuthenticateParams", protocols=_V2),
    "auth/logout": Method(SessionMethods.logout, protocols=_V2),
    "session/new": Method(SessionMethods.new_session, "NewSessionParams", light=new_session_params),
    "session/load": Method(SessionMethods.load_session, "LoadSessionParams", durable=True, protocols=_V1),
    "session/resume": Method(
        SessionMethods.resume_session, "ResumeSessionParams", durable=True, baseline_in=_V2
    ),
    "session/fork": Method(SessionMethods.fork_session, "ForkSessionParams", durable=True),
    "session/list": Method(SessionMethods.list_sessions, "ListSessionsParams", durable=True, baseline_in=_V2),
    "session/close": Method(SessionMethods.close_session, "SessionIdParams"),
    "session/delete": Method(SessionMethods.delete_session, "SessionIdParams", durable=True),
    "session/set_mode": Method(SessionMethods.set_mode, "SetModeParams", protocols=_V1),
    "session/set_config_option": Method(SessionMethods.set_config_option, "SetConfigOptionParams"),
    "session/prompt": Method(SessionMethods.prompt, "PromptParams"),
}
"""Every method the agent answers after ``initialize``, in the ACP versions that have it (v2
renames the auth methods, drops ``session/load`` and ``session/set_mode``, and makes list and
resume part of every agent's sessions: without a store they find nothing)."""

AGENT_METHODS = frozenset({"initialize", *METHODS})
"""Every ACP request method the agent answers (the fuzzer draws from these)."""

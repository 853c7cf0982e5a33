"""The sessions of one connection: made, restored from their logs, closed, deleted and listed.

Owns what sessions share: the process-wide tool registry (each session layers its own on it), the
session store and the project instructions.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from dsh_acp._config import AgentConfig, ModelChoice
from dsh_acp._safe_text import visible
from dsh_acp.loop._instructions import ProjectInstructions
from dsh_acp.permissions._modes import PermissionState
from dsh_acp.rpc._errors import AUTH_REQUIRED, INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError, invalid_params
from dsh_acp.session._events import ConfigChanged, SessionEvent
from dsh_acp.session._memory import collector_paused, release_freed_memory
from dsh_acp.session._session import Session, SessionIO
from dsh_acp.session._store import Redactor, SessionBusy, SessionStore, StoredSession, describe_os_error
from dsh_acp.wire._client_profile import ClientProfile
from dsh_acp.wire._render_context import RenderContext
from dsh_acp.wire._updates import AvailableCommandsUpdate, agent_message, notice
from dsh_tools.sandbox import sandbox_support

from ._session_params import SessionWhere

if TYPE_CHECKING:
    from dsh_acp.wire._client_params import ForkSessionParams, LoadSessionParams
    from dsh_tools import Services, ToolRegistry

    from ._tool_side import SessionTools

__all__ = ["SESSIONS_PAGE", "Replay", "SessionManager", "not_found"]

SESSIONS_PAGE = 50
"""Sessions per ``session/list`` page."""


Replay = Callable[[Session, Iterable[SessionEvent]], Awaitable[None]]
"""What a load does with a session's logged events as they are read (sends them to the editor)."""
Restored = tuple[Session, list[str], list[str]]
"""A reopened session, the lines of its log that were skipped, the MCP servers that failed."""


def not_found(session_id: str, protocol: int = 1) -> RpcError:
    """The error for a session id this agent does not know (v2 names it in the data too)."""
    data = {"sessionId": session_id} if protocol == 2 else None
    return RpcError(RESOURCE_NOT_FOUND, f'Resource not found: session "{session_id}"', data)


class SessionManager:
    """Every open session of one connection, and how sessions come and go."""

    def __init__(
        self,
        config: AgentConfig,
        io: SessionIO,
        background: TaskGroup,
        profile: ClientProfile,
        commands: AvailableCommandsUpdate,
    ) -> None:
        self.config = config
        self.commands = commands
        """The slash commands every session lists after its answer."""
        self.io = io
        self.background = background
        self.profile = profile
        """What the client can show, read from ``initialize`` (replaced if it initializes again)."""
        self.sessions: dict[str, Session] = {}
        self._state_dir = str(config.state_dir) if config.state_dir is not None else None
        self._tools: SessionTools | None = None
        self._tool_side = self._make_tool_side  # one bound method, shared by every session
        self._render: RenderContext | None = None
        self.store = (
            SessionStore(config.state_dir, clock=config.clock, redact=Redactor(config.secrets))
            if config.state_dir is not None
            else None
        )
        self.instructions = ProjectInstructions(config.instruction_files)
        self._told_sandbox = False

    @property
    def tools(self) -> SessionTools:
        """The sessions' tools, made when a session first needs its tools (a prompt, MCP
        servers): the tool modules are not loaded for sessions that are never prompted."""
        if self._tools is None:
            from ._tool_side import SessionTools  # see _tool_side

            self._tools = SessionTools(self.config, self.background, self.store)
        return self._tools

    def get(self, session_id: str) -> Session:
        """The open session of this id, or the not-found error."""
        session = self.sessions.get(session_id)
        if session is None:
            raise not_found(session_id, self.profile.protocol)
        return session

    def is_open(self, session: Session) -> bool:
        """Whether the session is still open here (not closed while something ran after it)."""
        return self.sessions.get(session.session_id) is session

    def choice(self, model_id: str | None) -> ModelChoice | None:
        """The configured model of this id, or the default one."""
        models = self.config.models
        return next((m for m in models if m.id == model_id), models[0] if models else None)

    def find_models(self) -> bool:
        """Whether a model is configured, looking again (the config file ``dsh-acp login``
        writes) while none was found since start-up."""
        config = self.config
        if not config.models and config.find_models is not None:
            config.models = config.find_models()
        return bool(config.models)

    def require_key(self) -> None:
        """Authentication required (-32000) while the configured API has no key: editors then
        offer the advertised auth methods."""
        source = self.config.model_source
        if source is None:
            return
        problem = source.missing_key()
        if problem is not None:
            raise RpcError(AUTH_REQUIRED, problem)
        if self.store is not None:  # the key may have been stored since start-up: never log it
            from dsh_acp.models._settings import SettingsError  # loaded with a model's settings

            try:
                settings = source.settings()
            except SettingsError:
                return
            self.store.redact.add(settings.api_key if settings else None)

    # -- making one ---------------------------------------------------------------------------

    def _make(self, session_id: str, parsed: SessionWhere) -> Session:
        permissions = PermissionState(mode=self.config.default_mode)
        cwd = sys.intern(parsed.cwd)  # sessions of one project share the string
        if self._state_dir is not None:
            permissions.project_of = (self._state_dir, cwd)
        choice = self.choice(None)
        return Session(
            session_id=session_id,
            cwd=cwd,
            model=choice.new_model() if choice else None,
            model_id=choice.id if choice else None,
            tool_side=self._tool_side,
            render=self._render_context(cwd),
            io=self.io,
            additional_directories=tuple(parsed.additional_directories),
            mcp_servers=tuple(parsed.mcp_servers),  # the empty tuple is one object for all
            permissions=permissions,
        )

    def _render_context(self, cwd: str) -> RenderContext:
        """The rendering of a session in ``cwd``: one object for consecutive sessions of a
        project (it is immutable), so an idle session does not hold a copy of its own."""
        render = self._render
        if render is None or render.cwd != cwd or render != RenderContext.for_profile(cwd, self.profile):
            render = self._render = RenderContext.for_profile(cwd, self.profile)
        return render

    def _make_tool_side(self, session: Session) -> tuple[ToolRegistry, Services]:
        return self.tools.layer(session, self.profile)

    async def _connect_mcp(self, session: Session) -> list[str]:
        """Start the session's MCP servers and register their tools in its layer; one line per
        server that failed (the session goes on without its tools)."""
        if not session.mcp_servers:
            return []
        try:
            # The MCP SDK's first import costs about a second of CPU: not on the event loop.
            await anyio.to_thread.run_sync(importlib.import_module, "dsh_acp.mcp._servers")
        except ImportError as error:  # a broken install must not fail the session either
            return [
                f'MCP server "{name}" failed to start: the MCP SDK is unusable ({error})'
                for name in (_server_name(raw) for raw in session.mcp_servers)
            ]
        from dsh_acp.mcp._servers import connect_servers  # imported just now

        ask = None
        if self.profile.questions:  # else the servers are not told they may ask
            from ._elicitation import ClientQuestions, McpQuestions  # the bridge: not for an idle session

            questions = ClientQuestions(self.io.request, session.session_id)
            ask = McpQuestions(session, questions, self.config.message_ids)
        connections, failures = await connect_servers(
            session.mcp_servers, session.registry, task_group=self.background, cwd=session.cwd, ask=ask
        )
        session.services.add(connections)  # closed with the session
        return failures

    async def create(self, parsed: SessionWhere) -> tuple[Session, list[str]]:
        """A new session, open and logged, and the MCP servers that failed to start."""
        self.find_models()
        self.require_key()
        session = self._make(self.config.session_ids(), parsed)
        try:
            failures = await self._connect_mcp(session)
            if self.store is not None:
                directories = list(session.additional_directories)
                session.log = self.store.create(session.session_id, session.cwd, directories)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await session.aclose()
            raise
        self.sessions[session.session_id] = session
        return session, failures

    async def restore(self, parsed: LoadSessionParams, replay: Replay | None = None) -> Restored:
        """A stored session reopened (or the one already open here), the lines of its log that
        could not be read, and the MCP servers that failed to start (a session already open keeps
        its servers).

        The log is read once: each event is applied to the session's state and handed to
        ``replay`` (if given) in the same pass, so no list of every event is ever held. The
        session is open here only once its state is the log's; if the replay is cut short (the
        editor hung up) it is closed again."""
        assert self.store is not None
        self.require_key()
        try:
            stream = self.store.read(parsed.session_id)
        except KeyError:
            raise not_found(parsed.session_id, self.profile.protocol) from None
        except ValueError as error:
            raise RpcError(INTERNAL_ERROR, str(error)) from None
        session = self.sessions.get(parsed.session_id)
        if session is not None:  # its state is already the log's: replayed, not applied again
            if replay is not None:
                with collector_paused():
                    await replay(session, stream)
            return session, stream.skipped, []
        session = self._make(parsed.session_id, parsed)
        try:
            session.log = self.store.open(parsed.session_id)
        except SessionBusy as error:
            raise invalid_params(str(error), "sessionId") from None
        try:
            failures = await self._connect_mcp(session)
            built = session.model_id
            with collector_paused():  # for as long as the load lasts (see collector_paused)
                events = session.applying(stream)
                if replay is not None:
                    await replay(session, events)
                else:
                    for _ in events:
                        pass
            self._restore_model(session, built)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await session.aclose()
            raise
        if session.log.read_only is not None:
            why = describe_os_error(session.log.read_only, session.log.path)
            failures = [
                *failures,
                f"Read-only session: {why}: it can be viewed, but a prompt or a change of mode or model "
                "will fail",
            ]
        self.sessions[session.session_id] = session
        return session, stream.skipped, failures

    async def fork(self, parsed: ForkSessionParams) -> Restored:
        """A new session whose history is a copy of a stored session's up to now, opened here
        (without a replay: the editor forks what it already shows); the source is only read.
        After the fork the two diverge: each has its own log."""
        assert self.store is not None
        self.require_key()
        session_id = self.config.session_ids()
        try:
            self.store.fork(parsed.session_id, session_id, parsed.cwd, list(parsed.additional_directories))
        except KeyError:
            raise not_found(parsed.session_id, self.profile.protocol) from None
        except ValueError as error:
            raise RpcError(INTERNAL_ERROR, str(error)) from None
        return await self.restore(parsed.model_copy(update={"session_id": session_id}))

    def _restore_model(self, session: Session, built: str | None) -> None:
        """The model the log chose, if it is still configured; else the default one stays (the
        reducer sets the id, as for every other change of the session's state)."""
        if session.model_id == built:
            return
        choice = self.choice(session.model_id)
        if choice is not None and choice.id == session.model_id:
            session.model = choice.new_model()
        else:  # not logged: if the model is configured again, the next load picks it again
            session.apply(ConfigChanged(model_id=built))

    def after_answer(
        self,
        session: Session,
        failures: Sequence[str],
        skipped: Sequence[str] = (),
        *,
        restored: bool = False,
    ) -> Callable[[], Awaitable[None]]:
        """What follows a session's answer: its commands, why any MCP server is missing, and which
        lines of its log could not be read (told, not logged: the next load tells it again). After
        a ``restored`` session's answer, what its load freed goes back to the system."""

        async def send() -> None:
            if self.profile.protocol == 1:  # v2's answer carried them
                await session.send(self.commands)
            await self._tell_no_sandbox(session)
            if failures and session.render.notices:
                for failure in failures:
                    title, _, detail = failure.partition(": ")
                    await session.send(notice("warning", title, detail))
            elif failures:
                await session.say("\n".join(map(visible, failures)), self.config.message_ids())
            if skipped:
                text = f"The session log had lines that could not be read, skipped: {', '.join(skipped)}."
                if session.render.notices:
                    await session.send(notice("warning", "Session log damaged", text))
                    return
                await session.send(agent_message(text, self.config.message_ids()))

        async def send_and_release() -> None:
            await send()
            # One turn of the loop first: the replay's last lines leave the write buffers.
            await anyio.lowlevel.checkpoint()
            release_freed_memory()

        return send_and_release if restored else send

    async def _tell_no_sandbox(self, session: Session) -> None:
        """Tell the user once, with the first session a client that shows notices opens, that
        commands run without the sandbox, and why."""
        if self._told_sandbox or not session.render.notices:
            return
        self._told_sandbox = True
        support = sandbox_support(self.config.sandbox)
        if not support.available:
            detail = (
                f"{support.detail[:1].upper()}{support.detail[1:]}. Commands run with all your rights: "
                "the approval rules are the only wall, and auto mode asks as default does."
            )
            await session.send(notice("warning", "Commands run without a sandbox", detail))

    # -- ending one ---------------------------------------------------------------------------

    async def close(self, session_id: str) -> None:
        """Cancel the session's turns (each prompt answers ``cancelled`` first), then release it."""
        session = self.get(session_id)
        turns = [*([session.turn] if session.turn is not None else []), *session.queue]
        session.cancel_turns()
        with anyio.fail_after(10):
            for turn in turns:
                await turn.ended.wait()
        self.sessions.pop(session_id, None)
        await session.aclose()

    async def delete(self, session_id: str) -> None:
        """Close the session if it is open here, then remove its log."""
        assert self.store is not None
        if session_id in self.sessions:
            await self.close(session_id)
        try:
            self.store.delete(session_id)
        except KeyError:
            raise not_found(session_id, self.profile.protocol) from None
        except SessionBusy as error:
            raise invalid_params(str(error), "sessionId") from None

    def cancel(self, session_id: str) -> None:
        """Stop the session's running turn and drop its queued prompts; unknown ids are ignored."""
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel_turns()

    async def aclose(self) -> None:
        """Cancel every turn and close every session (at once: each may wait for its servers)."""
        sessions = list(self.sessions.values())
        self.sessions.clear()
        async with anyio.create_task_group() as group:
            for session in sessions:
                group.start_soon(session.aclose)
        if self.store is not None:
            self.store.close()

    # -- listing ------------------------------------------------------------------------------

    def page(self, cwd: str | None, cursor: str | None) -> dict[str, Any]:
        """One page of the stored sessions (of ``cwd`` if given), newest first, from ``cursor``."""
        assert self.store is not None
        stored = self.store.list(cwd)
        start = 0
        if cursor:
            try:
                start = int(cursor)
            except ValueError:
                raise invalid_params(f"cursor {cursor!r} is not one we gave", "cursor") from None
        answer: dict[str, Any] = {
            "sessions": [_session_info(s) for s in stored[start : start + SESSIONS_PAGE]]
        }
        if start + SESSIONS_PAGE < len(stored):
            answer["nextCursor"] = str(start + SESSIONS_PAGE)
        return answer


def _session_info(stored: StoredSession) -> dict[str, Any]:
    """A ``SessionInfo``: a field the schema lets us omit is omitted rather than ``null`` (a
    client that reads ``null`` as a value crashed on it: CodeCompanion's ``/resume``)."""
    info: dict[str, Any] = {"sessionId": stored.session_id, "cwd": stored.cwd}
    if stored.additional_directories:
        info["additionalDirectories"] = stored.additional_directories
    if stored.title:
        info["title"] = visible(stored.title)
    if stored.updated_at:
        info["updatedAt"] = stored.updated_at
    return info


def _server_name(raw: object) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) and name else "?"

"""The session half of the agent: ``session/*`` methods, sessions and their prompt turns."""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel, ValidationError

from dsh_tools import AudioBlock, ContentBlock, ImageBlock, Services, TextBlock, ToolRegistry

from ._bridge import RenderContext, wire_block
from ._client_profile import ClientProfile
from ._coalesce import CoalescePolicy
from ._commands import MODEL_COMMANDS, available_commands, model_instruction, parse_command, tools_text
from ._config import AgentConfig, ModelChoice
from ._connection import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Connection,
    Reply,
    RpcError,
)
from ._instructions import ProjectInstructions
from ._model import ContextOverflow, ModelAuthError, ModelError, UserMessage
from ._modes import MODES, PermissionState, mode_gate, modes_wire
from ._options import EFFORT_OPTION, REASONING_OPTION, config_options, efforts
from ._prompt import system_prompt
from ._replay import replay_updates, restore_state
from ._scripted import ScriptExhausted
from ._session import Session, SessionIO, Turn
from ._store import LoadedSession, Redactor, SessionBusy, SessionStore
from ._titles import model_title, prompt_words, short_title
from ._turn import LoopSettings, StopReason, TurnRunner
from ._updates import agent_message, config_option_update, current_mode_update, notice, session_info_update
from ._wire import (
    AuthenticateParams,
    ListSessionsParams,
    LoadSessionParams,
    NewSessionParams,
    PromptParams,
    ResumeSessionParams,
    SessionIdParams,
    SetConfigOptionParams,
    SetModeParams,
    new_session_params,
)

__all__ = ["NO_MODEL_MESSAGE", "Protocol"]

_log = logging.getLogger("dsh_acp.protocol")

NO_MODEL_MESSAGE = (
    "No model is configured, so I cannot answer yet. Start dsh-acp with `--model script:PATH` "
    "(a scripted model, see the README) or `--model openai:<name>` with an API key."
)
_PAGE = 50


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
        self,
        config: AgentConfig,
        connection: Connection,
        background: TaskGroup,
        *,
        profile: ClientProfile | None = None,
    ) -> None:
        self.config = config
        self.background = background
        self.connection = connection
        self.profile = profile or ClientProfile()
        """What the client can show, read from ``initialize`` (the agent replaces it if the
        client initializes again)."""
        self.sessions: dict[str, Session] = {}
        self._state_dir = str(config.state_dir) if config.state_dir is not None else None
        self.tools = ToolRegistry()
        # The mode policy goes first so that it wraps every other policy (see _modes).
        self.tools.on_pre_execute(mode_gate(self.tools))
        for definition in config.tools() if config.tools else ():
            self.tools.register(definition)
        if config.configure_registry is not None:
            config.configure_registry(self.tools)
        self.store = (
            SessionStore(config.state_dir, clock=config.clock, redact=Redactor(config.secrets))
            if config.state_dir is not None
            else None
        )
        self.instructions = ProjectInstructions(config.instruction_files)
        self.settings = LoopSettings(
            max_model_requests=config.max_model_requests,
            coalesce=CoalescePolicy(max_bytes=config.coalesce_bytes, max_delay=config.coalesce_delay),
            system_prompt=lambda session: system_prompt(
                session.cwd, session.registry.schemas(), self.instructions.text(session.cwd)
            ),
        )
        self._io = SessionIO(notify=connection.notify, request=connection.request)
        self._methods: dict[str, Callable[[Any], Awaitable[dict[str, Any] | Reply]]] = {
            "authenticate": self._authenticate,
            "session/new": self._new_session,
            "session/load": self._load_session,
            "session/resume": self._resume_session,
            "session/list": self._list_sessions,
            "session/close": self._close_session,
            "session/delete": self._delete_session,
            "logout": self._logout,
            "session/set_mode": self._set_mode,
            "session/set_config_option": self._set_config_option,
        }

    # -- routing ----------------------------------------------------------------------------

    def on_request(self, method: str, params: Any) -> Awaitable[Any]:
        """Route one request. Runs synchronously on the read loop: whatever must be registered
        before the next message is read (a prompt's turn) is registered here."""
        if method == "session/prompt":
            return self._start_prompt(params)
        handler = self._methods.get(method)
        if (
            handler is None
            or (
                self.store is None
                and method in ("session/load", "session/resume", "session/list", "session/delete")
            )
            or (method == "logout" and self.config.model_source is None)
        ):
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return handler(params)

    def cancel(self, params: Any) -> None:
        """``session/cancel``: stop the session's running turn and drop its queued prompts (each
        answers ``cancelled``); unknown ids are ignored."""
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
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

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f'Resource not found: session "{session_id}"')
        return session

    # -- sessions ---------------------------------------------------------------------------

    async def _authenticate(self, params: Any) -> dict[str, Any]:
        parsed: AuthenticateParams = _validate(AuthenticateParams, params)
        from ._settings import API_KEY_AUTH_METHOD, LOGIN_AUTH_METHOD

        if self.config.model_source is None or parsed.method_id not in (
            API_KEY_AUTH_METHOD,
            LOGIN_AUTH_METHOD,
        ):
            raise RpcError(INVALID_PARAMS, f'Invalid params: unknown auth method "{parsed.method_id}"')
        self._require_key()
        return {}

    def _require_key(self) -> None:
        """Authentication required (-32000) while the configured API has no key: editors then
        offer the advertised auth methods."""
        source = self.config.model_source
        if source is None:
            return
        problem = source.missing_key()
        if problem is not None:
            raise RpcError(AUTH_REQUIRED, problem)
        if self.store is not None:  # the key may have been stored since start-up: never log it
            from ._settings import SettingsError

            try:
                settings = source.settings()
            except SettingsError:
                return
            self.store.redact.add(settings.api_key if settings else None)

    def _session_answer(self, session: Session) -> dict[str, Any]:
        return {
            "modes": modes_wire(session.permissions),
            "configOptions": self._options(session),
        }

    def _options(self, session: Session) -> list[dict[str, Any]]:
        return config_options(session, self.config.models, boolean=self.profile.boolean_options)

    def _choice(self, model_id: str | None) -> ModelChoice | None:
        models = self.config.models
        return next((m for m in models if m.id == model_id), models[0] if models else None)

    def _make_session(self, session_id: str, parsed: NewSessionParams) -> Session:
        profile = self.profile
        permissions = PermissionState(mode=self.config.default_mode)
        if self._state_dir is not None:
            permissions.project_of = (self._state_dir, parsed.cwd)
        choice = self._choice(None)
        session = Session(
            session_id=session_id,
            cwd=sys.intern(parsed.cwd),  # sessions of one project share the string
            model=choice.build() if choice else None,
            model_id=choice.id if choice else None,
            registry=self.tools.layer(),
            services=Services(permissions),
            render=RenderContext.for_profile(parsed.cwd, profile),
            io=self._io,
            additional_directories=tuple(parsed.additional_directories),
            mcp_servers=list(parsed.mcp_servers),
            permissions=permissions,
        )
        session.services.add(session.registry, as_type=ToolRegistry)  # what the mode policy looks up
        if self.config.ask_user is not None and profile.questions:  # a tool that cannot work is never offered
            ask_tool = self.config.ask_user()
            if self.tools.get(ask_tool.name) is None:
                from dsh_tools.questions import UserQuestions

                from ._elicitation import ClientQuestions

                session.registry.register(ask_tool)
                session.services.add(ClientQuestions(self._io.request, session_id), as_type=UserQuestions)
        can_read, can_write = profile.can_read, profile.can_write
        if profile.client_terminals:
            from dsh_tools.terminals import TerminalHost

            from ._client_terminals import ClientTerminals

            session.services.add(ClientTerminals(self._io.request, session_id), as_type=TerminalHost)
        if (can_read or can_write) and not self.config.force_local_fs:
            from dsh_tools.filesystem import FileSystem

            from ._client_fs import ClientFileSystem

            client_fs = ClientFileSystem(self._io.request, session_id, can_read=can_read, can_write=can_write)
            session.services.add(client_fs, as_type=FileSystem)
        return session

    async def _connect_mcp(self, session: Session) -> list[str]:
        """Start the session's MCP servers and register their tools in its layer; one line per
        server that failed (the session goes on without its tools)."""
        if not session.mcp_servers:
            return []
        from ._mcp import connect_servers

        connections, failures = await connect_servers(
            session.mcp_servers, session.registry, task_group=self.background, cwd=session.cwd
        )
        session.services.add(connections)  # closed with the session
        return failures

    def _after_answer(
        self,
        session: Session,
        failures: list[str],
        skipped: list[str] = (),  # type: ignore[assignment]
    ) -> Callable[[], Awaitable[None]]:
        """What follows a session's answer: its commands, why any MCP server is missing, and which
        lines of its log could not be read (told, not logged: the next load tells it again)."""

        async def send() -> None:
            await session.send(available_commands())
            if failures and session.render.notices:
                for failure in failures:
                    title, _, detail = failure.partition(": ")
                    await session.send(notice("warning", title, detail))
            elif failures:
                await self._say(session, "\n".join(failures))
            if skipped:
                text = f"The session log had lines that could not be read, skipped: {', '.join(skipped)}."
                if session.render.notices:
                    await session.send(notice("warning", "Session log damaged", text))
                    return
                await session.send(agent_message(text, self.config.message_ids()))

        return send

    async def _new_session(self, params: Any) -> dict[str, Any] | Reply:
        parsed = new_session_params(params) or _validate(NewSessionParams, params)
        self._require_key()
        session = self._make_session(self.config.session_ids(), parsed)
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
        answer = {"sessionId": session.session_id, **self._session_answer(session)}
        return Reply(answer, self._after_answer(session, failures))

    async def _restore(self, parsed: LoadSessionParams) -> tuple[Session, LoadedSession, list[str]]:
        """A stored session reopened (or the one already open here), what its log holds, and the
        MCP servers that failed to start (a session already open keeps its servers)."""
        assert self.store is not None
        self._require_key()
        try:
            loaded = self.store.load(parsed.session_id)
        except KeyError:
            raise RpcError(RESOURCE_NOT_FOUND, f'Resource not found: session "{parsed.session_id}"') from None
        except ValueError as error:
            raise RpcError(INTERNAL_ERROR, str(error)) from None
        session = self.sessions.get(parsed.session_id)
        if session is not None:
            return session, loaded, []
        session = self._make_session(parsed.session_id, parsed)
        try:
            session.log = self.store.open(parsed.session_id)
        except SessionBusy as error:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {error}") from None
        restored = restore_state(loaded.events)
        session.history = restored.history
        if restored.mode is not None:
            session.permissions.mode = restored.mode
        session.permissions.allow.update(restored.permissions.allow)
        session.permissions.reject.update(restored.permissions.reject)
        session.title = restored.title
        session.prompts = restored.prompts
        session.show_reasoning = restored.show_reasoning
        session.effort = restored.effort
        if restored.cost is not None:
            from decimal import Decimal

            session.cost = Decimal(restored.cost)
        if restored.model_id is not None and restored.model_id != session.model_id:
            choice = self._choice(restored.model_id)
            if choice is not None and choice.id == restored.model_id:
                session.model, session.model_id = choice.build(), choice.id
        try:
            failures = await self._connect_mcp(session)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await session.aclose()
            raise
        self.sessions[session.session_id] = session
        return session, loaded, failures

    async def _load_session(self, params: Any) -> dict[str, Any] | Reply:
        parsed: LoadSessionParams = _validate(LoadSessionParams, params)
        session, loaded, failures = await self._restore(parsed)
        for update in replay_updates(loaded.events, session.render):
            await session.send(update)
        answer = self._session_answer(session)
        return Reply(answer, self._after_answer(session, failures, loaded.skipped))

    async def _resume_session(self, params: Any) -> dict[str, Any] | Reply:
        parsed: ResumeSessionParams = _validate(ResumeSessionParams, params)
        session, loaded, failures = await self._restore(parsed)
        answer = self._session_answer(session)
        return Reply(answer, self._after_answer(session, failures, loaded.skipped))

    async def _list_sessions(self, params: Any) -> dict[str, Any]:
        parsed: ListSessionsParams = _validate(ListSessionsParams, params)
        assert self.store is not None
        stored = self.store.list(parsed.cwd)
        start = 0
        if parsed.cursor:
            try:
                start = int(parsed.cursor)
            except ValueError:
                raise RpcError(
                    INVALID_PARAMS, f"Invalid params: cursor {parsed.cursor!r} is not one we gave"
                ) from None
        page = stored[start : start + _PAGE]
        answer: dict[str, Any] = {
            "sessions": [
                {
                    "sessionId": s.session_id,
                    "cwd": s.cwd,
                    "additionalDirectories": s.additional_directories,
                    "title": s.title,
                    "updatedAt": s.updated_at,
                }
                for s in page
            ]
        }
        if start + _PAGE < len(stored):
            answer["nextCursor"] = str(start + _PAGE)
        return answer

    async def _close_session(self, params: Any) -> dict[str, Any]:
        parsed: SessionIdParams = _validate(SessionIdParams, params)
        session = self._session(parsed.session_id)
        turns = [*([session.turn] if session.turn is not None else []), *session.queue]
        session.cancel_turns()
        with anyio.fail_after(10):
            for turn in turns:
                await turn.done.wait()  # each prompt answers `cancelled` first
        self.sessions.pop(parsed.session_id, None)
        await session.aclose()
        return {}

    async def _delete_session(self, params: Any) -> dict[str, Any]:
        """``session/delete``: close the session if it is open here, then remove its log."""
        parsed: SessionIdParams = _validate(SessionIdParams, params)
        assert self.store is not None
        if parsed.session_id in self.sessions:
            await self._close_session(params)
        try:
            self.store.delete(parsed.session_id)
        except KeyError:
            raise RpcError(RESOURCE_NOT_FOUND, f'Resource not found: session "{parsed.session_id}"') from None
        except SessionBusy as error:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {error}") from None
        return {}

    async def _logout(self, params: Any) -> dict[str, Any]:
        """``logout``: forget the API key ``dsh-acp login`` stored (a key in the environment is
        the environment's: it stays, and the next session still finds it)."""
        source = self.config.model_source
        assert source is not None
        if source.config_path is not None:
            from ._login import remove_api_key
            from ._settings import SettingsError

            try:
                remove_api_key(source.config_path)
            except (SettingsError, OSError) as error:
                raise RpcError(INTERNAL_ERROR, f"cannot log out: {error}") from None
        return {}

    async def _set_mode(self, params: Any) -> dict[str, Any] | Reply:
        parsed: SetModeParams = _validate(SetModeParams, params)
        session = self._session(parsed.session_id)
        self._switch_mode(session, parsed.mode_id)
        return Reply({}, self._in_step(session, mode=False, options=True))

    def _switch_mode(self, session: Session, mode_id: str) -> None:
        if mode_id not in MODES:
            raise RpcError(INVALID_PARAMS, f'Invalid params: unknown mode "{mode_id}"; one of {list(MODES)}')
        session.permissions.mode = mode_id
        session.record({"type": "mode", "mode_id": mode_id})

    async def _switch_model(self, session: Session, model_id: str) -> None:
        choice = next((m for m in self.config.models if m.id == model_id), None)
        if choice is None:
            known = [m.id for m in self.config.models]
            raise RpcError(INVALID_PARAMS, f'Invalid params: unknown model "{model_id}"; one of {known}')
        if choice.id != session.model_id:
            await session.set_model(choice.build(), choice.id)
            session.record({"type": "config", "model_id": choice.id})

    def _in_step(self, session: Session, *, mode: bool, options: bool) -> Callable[[], Awaitable[None]]:
        """Keep the editor's pickers in step after a change: the mode, the complete option list."""

        async def send() -> None:
            if mode:
                await session.send(current_mode_update(session.permissions.mode))
            if options:
                choices = self._options(session)
                await session.send(config_option_update(choices))

        return send

    async def _set_config_option(self, params: Any) -> dict[str, Any] | Reply:
        parsed: SetConfigOptionParams = _validate(SetConfigOptionParams, params)
        session = self._session(parsed.session_id)
        value = parsed.value
        if parsed.config_id == "mode" and isinstance(value, str):
            self._switch_mode(session, value)
            answer = {"configOptions": self._options(session)}
            return Reply(answer, self._in_step(session, mode=True, options=False))
        if parsed.config_id == "model" and isinstance(value, str) and self.config.models:
            await self._switch_model(session, value)
        elif (
            parsed.config_id == EFFORT_OPTION
            and isinstance(value, str)
            and value in efforts(session, self.config.models)
        ):
            session.effort = value  # the next model request carries it
            session.record({"type": "config", "reasoning_effort": value})
        elif (
            parsed.config_id == REASONING_OPTION and isinstance(value, bool) and self.profile.boolean_options
        ):
            session.show_reasoning = value
            session.record({"type": "config", "show_reasoning": value})
        else:
            raise RpcError(
                INVALID_PARAMS, f'Invalid params: no config option "{parsed.config_id}" takes {value!r}'
            )
        return {"configOptions": self._options(session)}

    # -- prompts ----------------------------------------------------------------------------

    def _start_prompt(self, params: Any) -> Awaitable[dict[str, Any] | Reply]:
        parsed: PromptParams = _validate(PromptParams, params)
        session = self._session(parsed.session_id)
        if not parsed.prompt:
            raise RpcError(INVALID_PARAMS, "Invalid params: prompt is empty")
        choice = self._choice(session.model_id)
        for block in parsed.prompt:
            if isinstance(block, AudioBlock):
                raise RpcError(INVALID_PARAMS, "Invalid params: audio prompts are not supported")
            if isinstance(block, ImageBlock) and not (choice and choice.accepts_images):
                raise RpcError(INVALID_PARAMS, "Invalid params: this model does not take images")
        # Registered before the next message is read, so that a cancel right behind it finds it. A
        # prompt sent while a turn runs waits in the queue: it is neither run nor logged before then.
        turn = Turn()
        if session.turn is None:
            session.turn = turn
            turn.started.set()
        else:
            turn.queued = True
            session.queue.append(turn)
        return self._take_turn(session, turn, tuple(parsed.prompt))

    async def _take_turn(
        self, session: Session, turn: Turn, prompt: tuple[ContentBlock, ...]
    ) -> dict[str, Any] | Reply:
        """Wait for the prompt's turn, run it, then hand the session to the next queued prompt (the
        hand-over takes effect after this prompt's answer is written: the answer is written
        without yielding, so updates never mix between prompts)."""
        try:
            if turn.queued:
                await turn.started.wait()
                if turn.cancel_requested:  # cancelled while queued: it never ran, nothing is logged
                    return {"stopReason": "cancelled"}
            # A prompt that found the session idle runs (and is logged) even if a cancel came first.
            return await self._run_prompt(session, turn, prompt)
        finally:
            if turn in session.queue:  # the request itself was cancelled while it waited
                session.queue.remove(turn)
            if session.turn is turn:
                session.turn = session.queue.pop(0) if session.queue else None
                if session.turn is not None:
                    session.turn.started.set()
            turn.done.set()

    async def _run_prompt(
        self, session: Session, turn: Turn, prompt: tuple[ContentBlock, ...]
    ) -> dict[str, Any] | Reply:
        runner = TurnRunner(session, self.settings, self.config.message_ids, turn_index=session.prompts)
        session.prompts += 1
        command = parse_command(prompt)
        model_prompt = prompt
        if command is not None and command[0] in MODEL_COMMANDS:
            # The model does the work (its writes ask as any write does); the user sees what they typed.
            model_prompt = (TextBlock(text=model_instruction(*command)),)
            command = None
        stop: StopReason = "cancelled"
        try:
            with turn.scope:
                event: dict[str, Any] = {
                    "type": "user",
                    "content": [wire_block(block) for block in prompt],
                    "message_id": self.config.message_ids(),
                }
                if command is not None:
                    event["command"] = command[0]  # commands are not part of the model's conversation
                else:
                    session.history.append(UserMessage(model_prompt))
                    if model_prompt is not prompt:
                        event["model_content"] = [wire_block(block) for block in model_prompt]
                session.record(event)
                if command is not None:
                    stop = await self._run_command(session, runner, *command)
                elif session.model is None:
                    await self._say(session, NO_MODEL_MESSAGE)
                    stop = "end_turn"
                else:
                    stop = await runner.run()
            if turn.cancel_requested:
                stop = "cancelled"
                await runner.close_open_calls()
            session.record({"type": "stop", "reason": stop})
            if turn.log_error is not None:
                raise turn.log_error
            if stop != "cancelled" and command is None and model_prompt is prompt and session.title is None:
                if getattr(session.model, "writes_titles", False) and prompt_words(prompt):
                    # One short request after the answer: the user is not kept waiting for it.
                    session.title = ""  # taken: a quick second turn does not ask again
                    return Reply({"stopReason": stop}, lambda: self._write_title(session, prompt))
                await self._set_title(session, prompt_words(prompt))
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

    async def _run_command(
        self, session: Session, runner: TurnRunner, name: str, argument: str
    ) -> StopReason:
        if name == "tools":
            await self._say(session, tools_text(session.registry.schemas()))
        elif name == "permissions":
            from ._approvals import permissions_command

            rules = session.permissions
            answer = permissions_command(rules.allow, rules.reject, rules.project, argument, session.record)
            await self._say(session, answer)
        elif name == "mode":
            if argument not in MODES:
                await self._say(session, f"Unknown mode {argument!r}. Modes: {', '.join(MODES)}.")
                return "end_turn"
            self._switch_mode(session, argument)
            await self._in_step(session, mode=True, options=True)()
            label, description = MODES[argument]
            await self._say(session, f"Mode: {label}. {description}")
        elif name == "model":
            known = [m.id for m in self.config.models]
            if argument not in known:
                await self._say(
                    session, f"Unknown model {argument!r}. Models: {', '.join(known) or 'none configured'}."
                )
                return "end_turn"
            await self._switch_model(session, argument)
            await self._in_step(session, mode=False, options=True)()
            await self._say(session, f"Model: {argument}.")
        elif name == "compact":
            if session.model is None:
                await self._say(session, NO_MODEL_MESSAGE)
                return "end_turn"
            compaction_id = f"compaction-{self.config.message_ids()}"
            try:
                done = await runner.compact(compaction_id)
            except ContextOverflow as error:
                # The window was unknown or too optimistic: the server said how large it is.
                if not error.context_window:
                    raise
                done = await runner.compact(f"compaction-{self.config.message_ids()}", error.context_window)
            if not done:
                await self._say(session, "There is nothing to compact yet.")
        return "end_turn"

    async def _write_title(self, session: Session, prompt: tuple[ContentBlock, ...]) -> None:
        """The model's title for the session (the first prompt's words if it writes none)."""
        words = prompt_words(prompt)
        title = await model_title(session.model, words) if session.model is not None else None
        if self.sessions.get(session.session_id) is session:  # not closed meanwhile
            await self._set_title(session, title or words)

    async def _set_title(self, session: Session, text: str) -> None:
        title = short_title(text)
        if not title:
            return
        session.title = title
        now = self.config.clock()
        session.record({"type": "title", "title": title, "updated_at": now})
        await session.send(session_info_update(title, now))

    async def _say(self, session: Session, text: str) -> None:
        """An agent message outside the model (command answers, configuration hints), logged."""
        message_id = self.config.message_ids()
        await session.send(agent_message(text, message_id))
        session.record(
            {"type": "assistant", "text": text, "text_id": message_id, "tool_calls": [], "aside": True}
        )

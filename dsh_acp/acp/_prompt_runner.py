"""``session/prompt``: a prompt checked, queued behind the running one, logged, run (by the model
or as a slash command), answered with its stop reason, and the session titled after its first one."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from dsh_acp._coalesce_policy import CoalescePolicy
from dsh_acp._config import AgentConfig
from dsh_acp.loop._prompt import system_prompt
from dsh_acp.loop._titles import model_title, prompt_words, short_title
from dsh_acp.loop._turn import LoopSettings, StopReason, TurnRunner
from dsh_acp.models._model import ModelAuthError, ModelError
from dsh_acp.models._scripted import ScriptExhausted
from dsh_acp.rpc._connection import Reply
from dsh_acp.rpc._errors import AUTH_REQUIRED, INTERNAL_ERROR, REQUEST_CANCELLED, RpcError, invalid_params
from dsh_acp.session._events import TitleSet, TurnStopped, UserPrompt
from dsh_acp.session._session import Session, Turn, TurnState
from dsh_acp.wire._client_params import PromptParams
from dsh_acp.wire._updates import session_info_update
from dsh_tools import AudioBlock, ContentBlock, ImageBlock, TextBlock

from ._session_manager import SessionManager
from ._slash_commands import NO_MODEL_MESSAGE, CommandTable, SlashCommand, model_instruction, parse_command

__all__ = ["PromptRunner"]


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one prompt runs: its runner, the slash command it is (if any), what the model gets."""

    prompt: tuple[ContentBlock, ...]
    runner: TurnRunner
    command: tuple[SlashCommand, str] | None
    model_prompt: tuple[ContentBlock, ...]

    def logged(self, message_id: str) -> UserPrompt:
        """The prompt as the log keeps it (a command is not part of the model's conversation)."""
        return UserPrompt(
            self.prompt,
            message_id,
            command=self.command[0].name if self.command is not None else None,
            model_content=self.model_prompt if self.model_prompt is not self.prompt else None,
        )


_log = logging.getLogger("dsh_acp.prompts")


def prompt_runner(config: AgentConfig, sessions: SessionManager, commands: CommandTable) -> PromptRunner:
    """The prompt runner of one connection, its loop settings read from the configuration."""
    instructions = sessions.instructions
    settings = LoopSettings(
        max_model_requests=config.max_model_requests,
        max_task_requests=config.max_task_requests,
        coalesce=CoalescePolicy(max_bytes=config.coalesce_bytes, max_delay=config.coalesce_delay),
        system_prompt=lambda session: system_prompt(
            session.cwd, session.registry.schemas(), instructions.text(session.cwd)
        ),
    )
    return PromptRunner(config, sessions, settings, commands)


class PromptRunner:
    """Runs the prompts of every session, one at a time per session, in arrival order."""

    def __init__(
        self, config: AgentConfig, sessions: SessionManager, settings: LoopSettings, commands: CommandTable
    ) -> None:
        self.config = config
        self.settings = settings
        self._sessions = sessions
        self._commands = commands

    def start(self, parsed: PromptParams) -> Awaitable[dict[str, Any] | Reply]:
        """Check the prompt and register its turn. Synchronous, on the read loop: a cancel read
        right behind the prompt finds its turn. A prompt sent while a turn runs waits in the queue:
        it is neither run nor logged before then."""
        session = self._sessions.get(parsed.session_id)
        if not parsed.prompt:
            raise invalid_params("prompt is empty", "prompt")
        choice = self._sessions.choice(session.model_id)
        for block in parsed.prompt:
            if isinstance(block, AudioBlock):
                raise invalid_params("audio prompts are not supported", "prompt")
            if isinstance(block, ImageBlock) and not (choice and choice.accepts_images):
                raise invalid_params("this model does not take images", "prompt")
        turn = Turn(queued=session.turn is not None)
        if session.turn is None:
            session.turn = turn
        else:
            session.queue.append(turn)
        return self._take_turn(session, turn, tuple(parsed.prompt))

    async def _take_turn(
        self, session: Session, turn: Turn, prompt: tuple[ContentBlock, ...]
    ) -> dict[str, Any] | Reply:
        """Wait for the prompt's turn, run it, then hand the session to the next queued prompt (the
        hand-over takes effect after this prompt's answer is written: the answer is written
        without yielding, so updates never mix between prompts)."""
        if session.render.protocol == 2:
            return await self._take_turn_v2(session, turn, prompt)
        try:
            if turn.state is TurnState.QUEUED:
                await turn.running.wait()
                if turn.cancel_requested:  # cancelled while queued: it never ran, nothing is logged
                    return {"stopReason": "cancelled"}
            # A prompt that found the session idle runs (and is logged) even if a cancel came first.
            plan = self._plan(session, prompt)
            session.record(plan.logged(self.config.message_ids()))
            stop, then = await self._play(session, turn, plan)
            return {"stopReason": stop} if then is None else Reply({"stopReason": stop}, then)
        finally:
            self._hand_over(session, turn)

    async def _take_turn_v2(
        self, session: Session, turn: Turn, prompt: tuple[ContentBlock, ...]
    ) -> dict[str, Any] | Reply:
        """ACP v2: the prompt is answered once it joins the conversation (with its message's
        id), its turn goes on after the answer, and a ``state_update`` says when it ends (why,
        or the error that ended it). A prompt held behind a running turn and cancelled before
        its turn came is answered "request cancelled": it never joined the conversation."""
        try:
            if turn.state is TurnState.QUEUED:
                await turn.running.wait()
                if turn.cancel_requested:
                    raise RpcError(REQUEST_CANCELLED, "the prompt was cancelled before its turn came")
            plan = self._plan(session, prompt)
            message_id = self.config.message_ids()
            session.record(plan.logged(message_id))
            if turn.log_error is not None:  # not in the conversation: the prompt answers the failure
                raise turn.log_error
            for update in session.dialect.prompt_inserted(message_id, prompt):
                await session.send(update)
        except BaseException:
            self._hand_over(session, turn)
            raise
        return Reply({"messageId": message_id}, lambda: self._finish_v2(session, turn, plan))

    async def _finish_v2(self, session: Session, turn: Turn, plan: _Plan) -> None:
        """The rest of a v2 turn, after its prompt's answer, to the idle ``state_update``."""
        error: dict[str, Any] | None = None
        stop: StopReason | None = None
        then = None
        try:
            stop, then = await self._play(session, turn, plan)
        except RpcError as failed:
            error = {"code": failed.code, "message": failed.message}
        except Exception:
            _log.exception("a turn failed")
            error = {"code": INTERNAL_ERROR, "message": "Internal error"}
        finally:
            try:
                with anyio.CancelScope(shield=True):
                    for update in session.dialect.turn_ended(stop, error):
                        await session.send(update)
            finally:
                self._hand_over(session, turn)
        if then is not None:
            await then()

    def _hand_over(self, session: Session, turn: Turn) -> None:
        """The turn is over: the session goes to the next queued prompt, if any."""
        if turn in session.queue:  # the request itself was cancelled while it waited
            session.queue.remove(turn)
        if session.turn is turn:
            session.turn = session.queue.pop(0) if session.queue else None
            if session.turn is not None:
                session.turn.run()
        turn.end()

    def _plan(self, session: Session, prompt: tuple[ContentBlock, ...]) -> _Plan:
        """What the prompt runs: a slash command, or the model (a model command's instruction in
        place of what the user typed: the model does the work, and its writes ask as any write
        does; the user sees what they typed)."""
        runner = TurnRunner(session, self.settings, self.config.message_ids, turn_index=session.prompts)
        command = parse_command(prompt)
        model_prompt = prompt
        if command is not None and command[0].handler is None:
            model_prompt = (TextBlock(text=model_instruction(*command)),)
            command = None
        return _Plan(prompt, runner, command, model_prompt)

    async def _play(
        self, session: Session, turn: Turn, plan: _Plan
    ) -> tuple[StopReason, Callable[[], Awaitable[None]] | None]:
        """Run the turn of a prompt already logged: its stop reason (logged too), and what is to
        follow the answer (a title the model writes). A model's failure is an ``RpcError``."""
        runner = plan.runner
        try:
            stop = await self._turn(session, turn, plan)
            if turn.log_error is not None:
                raise turn.log_error
            if stop != "cancelled" and plan.command is None and plan.model_prompt is plan.prompt:
                return stop, await self._titled(session, plan.prompt)
            return stop, None
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

    async def _turn(self, session: Session, turn: Turn, plan: _Plan) -> StopReason:
        """The prompt run (by the model or as a command); its stop reason, logged."""
        stop: StopReason = "cancelled"
        command, runner = plan.command, plan.runner
        with turn.scope:
            if command is not None:
                stop = await self._commands.run(session, runner, command[0].name, command[1])
            elif session.model is None:
                await session.say(NO_MODEL_MESSAGE, self.config.message_ids())
                stop = "end_turn"
            else:
                stop = await runner.run()
        if turn.cancel_requested:
            stop = "cancelled"
            await runner.close_open_calls()
        session.record(TurnStopped(stop))
        return stop

    async def _titled(
        self, session: Session, prompt: tuple[ContentBlock, ...]
    ) -> Callable[[], Awaitable[None]] | None:
        """A session's first model prompt titles it: by the model after the answer where it
        writes titles (returned, to follow the answer), else now by the prompt's words."""
        if session.title is not None or session.titling:
            return None
        if session.model is not None and session.model.writes_titles and prompt_words(prompt):
            # One short request after the answer: the user is not kept waiting for it.
            session.titling = True
            return lambda: self._write_title(session, prompt)
        await self._set_title(session, prompt_words(prompt))
        return None

    async def _write_title(self, session: Session, prompt: tuple[ContentBlock, ...]) -> None:
        """The model's title for the session (the first prompt's words if it writes none)."""
        words = prompt_words(prompt)
        title = await model_title(session.model, words) if session.model is not None else None
        if self._sessions.is_open(session):  # not closed meanwhile
            await self._set_title(session, title or words)

    async def _set_title(self, session: Session, text: str) -> None:
        title = short_title(text)
        if not title:
            return
        now = self.config.clock()
        session.record(TitleSet(title, now))
        await session.send(session_info_update(title, now))

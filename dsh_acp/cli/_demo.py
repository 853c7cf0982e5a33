"""``dsh-acp demo``: watch the agent work as an editor would, with no model, no key and no editor.

The demo makes a throw-away project (``_demo_script.WORKSPACE``: a module with a bug and its tests),
writes a scripted model that fixes the bug, and launches the real agent, ``python -m dsh_acp
--model script:FILE --mode default``, as a subprocess. This module then plays the editor over real
ACP on the agent's stdio: it initializes with Zed's client capabilities (so commands stream into a
live terminal), opens a session, sends the prompt, answers the permission prompts and the agent's
``fs/*`` requests, and draws what an agent panel shows as the updates arrive: messages and
thoughts, tool-call cards (title, kind, status, locations, diffs, live terminal output and its exit
code), the plan and the session title. At the end it reloads the session (``session/load``) and
checks that the replay rebuilds the same panel.

``--raw`` prints the JSON-RPC lines instead, both directions, marked ``->`` (editor to agent) and
``<-`` (agent to editor).

``rich`` is imported here and nowhere on the agent's own path: ``_cli`` imports this module only
for the ``demo`` command, so the agent's cold start never pays for it. Without a terminal (CI, a
pipe) rich prints plain text, and the cards appear once finished instead of updating in place.
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import orjson
from anyio.abc import Process
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from dsh_acp.rpc._connection import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Connection,
    ConnectionClosed,
    RpcError,
)
from dsh_acp.rpc._tap import LineTapReceive, LineTapSend

from ._demo_script import PERMISSION_CHOICES, PROMPT, demo_script, write_workspace

__all__ = ["demo_main"]

# What Zed sends in ``initialize``: its own file buffers (fs/*), and live terminal output through
# ``_meta.terminal_output``, which makes the agent stream command output into a terminal card.
_ZED_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
    "_meta": {"terminal_output": True},
}
_TURN_LIMIT_S = 60.0  # the scripted session takes seconds; a hung agent must not hang the demo
_EXIT_LIMIT_S = 10.0  # the agent must exit promptly once its stdin closes
_PERMISSION_PAUSE_S = 0.8  # in a terminal, let the viewer see the buttons before "clicking"
_LIVE_TAIL_LINES = 12  # a running terminal shows its last lines, as a panel of fixed height would

Direction = Literal["->", "<-"]


class DemoError(Exception):
    """The agent failed: the demo reports it on one line and exits non-zero."""


def demo_main(argv: Sequence[str]) -> int:
    """Entry point of ``dsh-acp demo``."""
    parser = argparse.ArgumentParser(
        prog="dsh-acp demo",
        description=(
            "Run the agent on a small built-in task (scripted model: no key, no network) and show "
            "what an editor's agent panel shows, live."
        ),
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="print the JSON-RPC wire instead: '-> ' lines go from editor to agent, '<- ' lines back",
    )
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        # A pipe with a non-UTF-8 locale must not crash on a box-drawing character.
        sys.stdout.reconfigure(errors="replace")
    view: _View = _RawView() if args.raw else _RichView(Console(highlight=False))
    try:
        anyio.run(_demo, view)
    except BaseException as error:
        view.close()
        # anyio reports what ended its tasks in (nested) groups; the first decisive one tells why.
        leaves = list(_leaves(error))
        for kind in (KeyboardInterrupt, SystemExit, _ReaderGone, DemoError):
            cause = next((leaf for leaf in leaves if isinstance(leaf, kind)), None)
            if isinstance(cause, KeyboardInterrupt):
                return 130
            if isinstance(cause, SystemExit):  # rich's answer to a closed pipe (`demo | head`)
                return cause.code if isinstance(cause.code, int) else 1
            if isinstance(cause, _ReaderGone):
                return 1
            if isinstance(cause, DemoError):
                print(f"dsh-acp demo: {cause}", file=sys.stderr)
                return 1
        raise
    return 0


class _ReaderGone(Exception):
    """Whoever read our output closed the pipe (``demo --raw | head``): stop, quietly."""


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


# -- the session ------------------------------------------------------------------------------


async def _demo(view: _View) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dsh-acp-demo-") as temp:
        root = Path(temp)
        workspace = root / "calc"
        workspace.mkdir()
        write_workspace(workspace)
        script = root / "model.json"
        script.write_bytes(orjson.dumps(demo_script(workspace), option=orjson.OPT_INDENT_2))
        args = ["--model", f"script:{script}", "--state-dir", str(root / "state"), "--mode", "default"]
        view.intro(workspace, f"python -m dsh_acp --model script:{script.name} --mode default")
        async with _launch(args, view) as editor:
            try:
                with anyio.fail_after(_TURN_LIMIT_S):
                    await editor.run_session(workspace)
            except TimeoutError:
                raise DemoError(
                    f"the agent did not finish the session within {_TURN_LIMIT_S:.0f} s"
                ) from None
        view.finished(time.monotonic() - started)


@dataclass
class _AgentProcess:
    """The agent subprocess and the last lines of its stderr (for the error message)."""

    process: Process
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=20))

    async def collect_stderr(self) -> None:
        assert self.process.stderr is not None
        buffer = b""
        async for chunk in self.process.stderr:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            self.stderr.extend(line.decode(errors="replace") for line in lines if line.strip())
        if buffer.strip():
            self.stderr.append(buffer.decode(errors="replace"))

    def describe_exit(self, when: str = "") -> str:
        """``the agent exited with code 3 before answering initialize (it said: ...)``."""
        code = self.process.returncode
        said = f" (it said: {self.stderr[-1]})" if self.stderr else ""
        return f"the agent exited{'' if code is None else f' with code {code}'}{when}{said}"


class _Editor:
    """The editor side of the connection (a ``Dispatcher``): sends the editor's requests, answers
    the agent's, and hands everything to the view."""

    def __init__(self, agent: _AgentProcess, view: _View) -> None:
        self._agent = agent
        self._view = view
        self._answers = deque(PERMISSION_CHOICES)
        self._replay: _PanelState | None = None  # set while session/load replays the session
        self.connection: Connection | None = None

    async def request(self, method: str, params: Any) -> Any:
        assert self.connection is not None
        try:
            return await self.connection.request(method, params)
        except RpcError as error:
            raise DemoError(f"the agent answered {method} with error {error.code}: {error.message}") from None
        except ConnectionClosed:
            await self._agent_gone()
            raise DemoError(self._agent.describe_exit(f" before answering {method}")) from None

    async def _agent_gone(self) -> None:
        with anyio.move_on_after(1):  # let the exit code and last stderr line arrive
            await self._agent.process.wait()

    async def run_session(self, cwd: Path) -> None:
        """The editor's side of the story: handshake, a session, one prompt, then a reload."""
        init = await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": _ZED_CAPABILITIES,
                "clientInfo": {"name": "dsh-acp-demo", "title": "dsh-acp demo", "version": "1"},
            },
        )
        session = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id = session["sessionId"]
        self._view.session_opened(init, session)
        self._view.user_prompt(PROMPT)
        answer = await self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]}
        )
        stop = answer.get("stopReason")
        self._view.turn_ended(stop)
        if stop != "end_turn":
            raise DemoError(f"the prompt turn ended with stopReason {stop!r}, not 'end_turn'")
        # An editor reopening the session gets it replayed; the replay must rebuild the same panel.
        self._replay = _PanelState(cwd)  # the replay includes the user's prompt, as user_message_chunk
        await self.request("session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []})
        replay, self._replay = self._replay, None
        self._view.replayed(replay)

    # -- the agent's messages (Dispatcher) ------------------------------------------------------

    def on_request(self, method: str, params: Any, request_id: int | str) -> Awaitable[Any]:
        if method == "session/request_permission":
            return self._permission(params)
        if method == "fs/read_text_file":
            return self._read_file(params)
        if method == "fs/write_text_file":
            return self._write_file(params)
        # Zed would serve terminal/* too, but the agent never uses it: it streams its own output.
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def on_notification(self, method: str, params: Any) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return
        update = params.get("update")
        if not isinstance(update, dict):
            return
        if self._replay is not None:
            self._replay.apply(update)
        else:
            self._view.update(update)

    async def _permission(self, params: dict[str, Any]) -> Any:
        options = params.get("options") or []
        tool_call = params.get("toolCall") or {}
        # The demo's person clicks the button of the planned kind ("Always allow", then "Allow").
        wanted = self._answers.popleft() if self._answers else "allow_once"
        option = next((o for o in options if o.get("kind") == wanted), None)
        option = option or next((o for o in options if o.get("kind") == "allow_once"), None)
        if option is None:
            raise RpcError(INTERNAL_ERROR, "the demo found no option that allows the call")
        await self._view.permission(tool_call, options, option)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    async def _read_file(self, params: dict[str, Any]) -> Any:
        # Like an editor with no unsaved buffer for the file: what is on disk.
        path = params["path"]
        self._view.file_access("fs/read_text_file", path)
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {path}") from None
        line, limit = params.get("line"), params.get("limit")
        if line or limit:
            rows = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(rows[start : start + limit if limit else None])
        return {"content": text}

    async def _write_file(self, params: dict[str, Any]) -> Any:
        path = params["path"]
        self._view.file_access("fs/write_text_file", path)
        await anyio.Path(path).write_text(params["content"], encoding="utf-8")
        return {}


@asynccontextmanager
async def _launch(args: Sequence[str], view: _View) -> AsyncIterator[_Editor]:
    """Start ``python -m dsh_acp ARGS`` and connect to it as the editor; the agent runs for the
    block's length, then is ended the way editors end it: by closing its stdin."""
    # The scripted session runs `python3`; put this interpreter's directory first on the PATH so
    # that it is the one found, even from a virtualenv that was never activated.
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    try:
        process = await anyio.open_process(
            [sys.executable, "-m", "dsh_acp", *args], env={**os.environ, "PATH": path}
        )
    except OSError as error:
        raise DemoError(f"cannot start the agent: {error}") from None
    assert process.stdout is not None
    assert process.stdin is not None
    agent = _AgentProcess(process)
    editor = _Editor(agent, view)
    send = LineTapSend(process.stdin, lambda raw: view.wire("->", raw))
    editor.connection = Connection(
        LineTapReceive(process.stdout, lambda raw: view.wire("<-", raw)), send, editor
    )
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(editor.connection.serve)
            group.start_soon(agent.collect_stderr)
            group.start_soon(view.animate)
            yield editor
            await send.aclose()
            with anyio.move_on_after(_EXIT_LIMIT_S):
                await process.wait()
            group.cancel_scope.cancel()  # stops the animation; the other tasks ended with the agent
        if process.returncode is None:
            raise DemoError(f"the agent did not exit within {_EXIT_LIMIT_S:.0f} s of its stdin closing")
        if process.returncode != 0:
            raise DemoError(agent.describe_exit())
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


# -- the panel's state: what an editor keeps from the updates -----------------------------------


@dataclass
class _Message:
    """A run of ``user_message_chunk``, ``agent_message_chunk`` or ``agent_thought_chunk``."""

    kind: str
    message_id: str | None
    text: str = ""


@dataclass
class _Card:
    """A tool call as the editor holds it: the last value of every field the agent sent."""

    call_id: str
    title: str = ""
    kind: str = "other"
    status: str = "pending"
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    terminal: bool = False  # announced with _meta.terminal_info
    output: str = ""  # the terminal's text: every _meta.terminal_output chunk, appended
    exit_code: int | None = None
    signal: str | None = None
    exited: bool = False
    permission: tuple[str, str] | None = None  # (what was asked, the answer)
    asking: list[dict[str, Any]] | None = None  # the options, while the question is open
    file_access: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")


@dataclass
class _Plan:
    """One ``plan`` update (each replaces the whole plan)."""

    entries: list[dict[str, Any]]


_Entry = _Message | _Card | _Plan
_STATUS_ORDER = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2}


class _PanelState:
    """Applies ``session/update``s as an editor does, and notes what an editor would trip over."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.timeline: list[_Entry] = []
        self.plan: _Plan | None = None
        """The session's plan: each update replaces it, as an editor's plan panel does."""
        self.cards: dict[str, _Card] = {}
        self.title: str | None = None
        self.usage: tuple[int, int] | None = None
        self.commands: list[str] = []
        self.problems: list[str] = []

    def add_user_text(self, text: str) -> None:
        self.timeline.append(_Message("user_message_chunk", None, text))

    def apply(self, update: dict[str, Any]) -> None:
        """Fold one update in."""
        kind = update.get("sessionUpdate")
        if kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk"):
            self._chunk(kind, update)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool_call(kind, update)
        elif kind == "plan":
            self.plan = _Plan(list(update.get("entries") or []))
        elif kind == "session_info_update" and isinstance(update.get("title"), str):
            self.title = update["title"]
        elif kind == "usage_update":
            self.usage = (int(update.get("used", 0)), int(update.get("size", 0)))
        elif kind == "available_commands_update":
            self.commands = [str(c.get("name")) for c in update.get("availableCommands") or []]

    def _chunk(self, kind: str, update: dict[str, Any]) -> None:
        content = update.get("content") or {}
        text = content.get("text", "") if content.get("type") == "text" else f"[{content.get('type')}]"
        message_id = update.get("messageId")
        last = self.timeline[-1] if self.timeline else None
        # Chunks of one message share a messageId (or, without ids, simply follow each other).
        if isinstance(last, _Message) and last.kind == kind and last.message_id == message_id:
            last.text += text
        else:
            self.timeline.append(_Message(kind, message_id, text))

    def _tool_call(self, kind: str, update: dict[str, Any]) -> None:
        call_id = str(update.get("toolCallId"))
        card = self.cards.get(call_id)
        if card is None:
            if kind == "tool_call_update":
                self.problems.append(f"tool_call_update for {call_id}, which was never announced")
            card = self.cards[call_id] = _Card(call_id)
            self.timeline.append(card)
        if "title" in update:
            card.title = str(update["title"])
        if "kind" in update:
            card.kind = str(update["kind"])
        if "status" in update:
            status = str(update["status"])
            backwards = _STATUS_ORDER.get(status, 0) < _STATUS_ORDER.get(card.status, 0)
            if backwards or (card.finished and status != card.status):
                self.problems.append(f"{call_id}: status went from {card.status} to {status}")
            card.status = status
        if "content" in update:  # content and locations replace the whole collection
            card.content = list(update["content"] or [])
        if "locations" in update:
            card.locations = list(update["locations"] or [])
            for location in card.locations:
                if not Path(str(location.get("path", ""))).is_absolute():
                    self.problems.append(f"{call_id}: location path {location.get('path')!r} is not absolute")
        meta = update.get("_meta") or {}
        if "terminal_info" in meta:
            card.terminal = True
        if "terminal_output" in meta:
            if not card.terminal:
                self.problems.append(f"{call_id}: terminal output for a card without terminal_info")
            card.output += str(meta["terminal_output"].get("data", ""))
        if "terminal_exit" in meta:
            card.exited = True
            card.exit_code = meta["terminal_exit"].get("exit_code")
            card.signal = meta["terminal_exit"].get("signal")

    def open_cards(self) -> list[_Card]:
        return [card for card in self.cards.values() if not card.finished]

    def snapshot(self) -> dict[str, Any]:
        """What the panel shows in the end, for comparing a replay with the live run. Live output
        may replay as one chunk and a message as one chunk: only the assembled text counts."""
        return {
            "title": self.title,
            "messages": [(m.kind, m.text) for m in self.timeline if isinstance(m, _Message)],
            "plan": self.plan.entries if self.plan else None,
            **{
                f"card {card.call_id}": {
                    "title": card.title,
                    "kind": card.kind,
                    "status": card.status,
                    "content": card.content,
                    "locations": card.locations,
                    "terminal output": card.output,
                    "exit code": (card.exit_code, card.signal) if card.exited else None,
                }
                for card in self.cards.values()
            },
        }


def _differences(live: dict[str, Any], replay: dict[str, Any]) -> list[str]:
    """Human-readable differences between two snapshots, one line each."""
    found = []
    for key in dict.fromkeys([*live, *replay]):
        a, b = live.get(key), replay.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += [f"{key}: {d}" for d in _differences(a, b)]
        elif a != b:
            found.append(f"{key}: {_first_difference(a, b)}")
    return found


def _first_difference(live: Any, replay: Any) -> str:
    if isinstance(live, str) and isinstance(replay, str):
        a, b = live.splitlines(), replay.splitlines()
        for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
            if x != y:
                return f"line {number} is {x!r} live but {y!r} in the replay"
        return f"{len(a)} lines live, {len(b)} in the replay"
    return f"{_short(live)} live, {_short(replay)} in the replay"


def _short(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 100 else text[:97] + "..."


# -- views --------------------------------------------------------------------------------------


class _View:
    """What the demo shows; the default shows nothing (each view overrides what it draws)."""

    def intro(self, workspace: Path, command: str) -> None: ...
    def wire(self, direction: Direction, raw: bytes) -> None: ...
    def session_opened(self, init: dict[str, Any], session: dict[str, Any]) -> None: ...
    def user_prompt(self, text: str) -> None: ...
    def update(self, update: dict[str, Any]) -> None: ...
    def file_access(self, method: str, path: str) -> None: ...
    def turn_ended(self, stop_reason: str | None) -> None: ...
    def replayed(self, replay: _PanelState) -> None: ...
    def finished(self, seconds: float) -> None: ...
    def close(self) -> None: ...

    async def permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]], chosen: dict[str, Any]
    ) -> None: ...

    async def animate(self) -> None: ...


class _RawView(_View):
    """``--raw``: the wire itself, one JSON-RPC message a line, as it passes."""

    def wire(self, direction: Direction, raw: bytes) -> None:
        try:
            sys.stdout.write(f"{direction} {raw.decode(errors='replace')}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            # Point stdout at /dev/null so the interpreter's final flush does not complain again; not
            # an OSError, so that the connection does not mistake it for the agent's pipe breaking.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise _ReaderGone from None


class _RichView(_View):
    """The agent panel, drawn with rich.

    Finished entries (a message, a completed card, a plan) are printed once, in the order the agent
    produced them. In a terminal, the unfinished ones — a running command, a card waiting for
    permission — are drawn below them in a live region that updates in place; elsewhere (a pipe) there
    is no live region, and each entry appears once it is finished.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = _PanelState(Path())  # the workspace is set by intro()
        self._printed = 0  # entries of state.timeline already printed
        self._live: Live | None = None
        self._spinner = Spinner("dots", text=Text(" working", style="dim"), style="cyan")
        self._shown_commands: list[str] = []

    # -- the story ----------------------------------------------------------------------------

    def intro(self, workspace: Path, command: str) -> None:
        self.state.cwd = workspace
        c = self.console
        c.print(Rule(Text("dsh-acp demo", style="bold")))
        c.print(
            Text.assemble(
                "The agent runs as a subprocess and speaks ACP on its stdio; this terminal plays the editor "
                "(with Zed's capabilities) and draws what its agent panel shows. The model is a script: "
                "no key, no network.\n",
                ("agent:     ", "dim"),
                f"{command}\n",
                ("workspace: ", "dim"),
                f"{workspace} (temporary)",
            )
        )
        if self.console.is_terminal:
            self._live = Live(
                console=self.console,
                get_renderable=self._live_region,
                auto_refresh=False,  # refreshed from the event loop: no thread reads the state mid-update
                transient=True,
                vertical_overflow="visible",
            )
            self._live.start()

    def session_opened(self, init: dict[str, Any], session: dict[str, Any]) -> None:
        info = init.get("agentInfo") or {}
        modes = session.get("modes") or {}
        mode_names = {m.get("id"): m.get("name") for m in modes.get("availableModes") or []}
        model: dict[str, Any] = next(
            (o for o in session.get("configOptions") or [] if o.get("id") == "model"), {}
        )
        self._print(
            Text.assemble(
                ("● ", "green"),
                (f"{info.get('title') or info.get('name')} {info.get('version', '')}", "bold"),
                f" · session {str(session.get('sessionId'))[:8]}…",
                f" · mode {mode_names.get(modes.get('currentModeId'), modes.get('currentModeId'))}",
                f" · model {model.get('currentValue', '?')}",
            )
        )

    def user_prompt(self, text: str) -> None:
        self._show_commands()  # they came with the session; an editor offers them in its prompt box
        self.state.add_user_text(text)
        self._flush()

    def update(self, update: dict[str, Any]) -> None:
        self.state.apply(update)
        if self._shown_commands:  # the first list waits for the session header (see user_prompt)
            self._show_commands()
        self._flush()

    def _show_commands(self) -> None:
        if self.state.commands and self.state.commands != self._shown_commands:
            self._shown_commands = self.state.commands
            self._print(
                Text("Slash commands: " + "  ".join(f"/{c}" for c in self.state.commands), style="dim")
            )

    async def permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]], chosen: dict[str, Any]
    ) -> None:
        call_id = str(tool_call.get("toolCallId"))
        if call_id not in self.state.cards:  # the request must follow the tool_call it asks about
            self.state.problems.append(f"permission asked for {call_id} before its tool_call")
            self.state.apply({"sessionUpdate": "tool_call", **tool_call})
        card = self.state.cards[call_id]
        card.asking = options
        self._refresh()
        if self._live is not None:
            await anyio.sleep(_PERMISSION_PAUSE_S)  # a person would take a moment to decide
        card.asking = None
        card.permission = (str(tool_call.get("title") or card.title), str(chosen.get("name")))
        self._refresh()

    def file_access(self, method: str, path: str) -> None:
        # The agent reads and writes through the editor (its unsaved buffers, its review flow): note
        # it on the open card that names the file.
        for card in reversed(self.state.open_cards()):
            if any(location.get("path") == path for location in card.locations):
                card.file_access.append(f"{method} {self._relative(path)}")
                self._refresh()
                return

    def turn_ended(self, stop_reason: str | None) -> None:
        for card in self.state.open_cards():
            self.state.problems.append(f"{card.call_id} was still {card.status} when the prompt was answered")
        self._flush(everything=True)
        self.close()
        if self.state.plan is not None:
            self._print(self._plan(self.state.plan))
        if self.state.title:  # an editor shows it on the thread's tab; it came with the turn
            self._print(Rule(Text.assemble(("Session title: ", "dim"), (self.state.title, "bold"))))
        style = "green" if stop_reason == "end_turn" else "red"
        footer = Text.assemble(("■ ", style), "turn ended: ", (str(stop_reason), f"bold {style}"))
        if self.state.usage:
            used, size = self.state.usage
            footer.append(f"  ·  context {used:,} / {size:,} tokens", style="dim")
        self.console.print(footer)

    def replayed(self, replay: _PanelState) -> None:
        cards = len(replay.cards)
        differences = _differences(self.state.snapshot(), replay.snapshot())
        differences += [f"in the replay: {problem}" for problem in replay.problems]
        if not differences:
            self.console.print(
                Text.assemble(
                    ("✓ ", "green"),
                    f"session/load replayed the session: the same {cards} cards, messages, plan and title.",
                )
            )
            return
        self.console.print(
            Text(
                f"⚠ session/load replayed the session ({cards} cards), but not as it was shown live:",
                "yellow",
            )
        )
        for difference in differences:
            self.console.print(Text(f"  - {difference}", "yellow"))

    def finished(self, seconds: float) -> None:
        for problem in self.state.problems:
            self.console.print(Text(f"⚠ on the wire: {problem}", "yellow"))
        self.console.print(Rule(Text(f"done in {seconds:.1f} s", style="dim")))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    async def animate(self) -> None:
        while True:  # the spinner moves even while no update arrives
            self._refresh()
            await anyio.sleep(0.1)

    # -- printing -----------------------------------------------------------------------------

    def _print(self, renderable: RenderableType) -> None:
        self.console.print(renderable)  # under a Live, rich prints above the live region

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _flush(self, everything: bool = False) -> None:
        """Print the finished entries at the head of the timeline, in order (all at the turn's end)."""
        timeline = self.state.timeline
        while self._printed < len(timeline):
            entry = timeline[self._printed]
            if isinstance(entry, _Card):
                done = entry.finished
            else:  # a message may still grow while it is the last entry; a plan is final at once
                done = not isinstance(entry, _Message) or self._printed < len(timeline) - 1
            if not (done or everything):
                break
            self._print(self._entry(entry, live=False))
            self._printed += 1
        self._refresh()

    def _live_region(self) -> RenderableType:
        # The plan stays at the bottom, updated in place, until the turn ends and it is printed once.
        pending = [self._entry(entry, live=True) for entry in self.state.timeline[self._printed :]]
        plan = [self._plan(self.state.plan)] if self.state.plan is not None else []
        return Group(*pending, *plan, self._spinner)

    # -- drawing the entries --------------------------------------------------------------------

    def _entry(self, entry: _Entry, *, live: bool) -> RenderableType:
        if isinstance(entry, _Card):
            return self._card(entry, live=live)
        if isinstance(entry, _Plan):
            return self._plan(entry)
        if entry.kind == "user_message_chunk":
            return Panel(
                Text(entry.text), title="You", title_align="left", border_style="blue", box=box.ROUNDED
            )
        if entry.kind == "agent_thought_chunk":
            return Padding(Text.assemble(("✻ Thinking  ", "magenta"), (entry.text, "dim italic")), (0, 1))
        return Padding(Markdown(entry.text), (0, 1))

    def _plan(self, plan: _Plan) -> RenderableType:
        marks = {"completed": ("☑", "green"), "in_progress": ("▣", "yellow"), "pending": ("☐", "default")}
        done = sum(entry.get("status") == "completed" for entry in plan.entries)
        lines = Text()
        for entry in plan.entries:
            mark, style = marks.get(str(entry.get("status")), ("?", "red"))
            lines.append(f"{mark} ", style=style)
            lines.append(str(entry.get("content")), style="dim" if entry.get("status") == "completed" else "")
            if entry.get("priority") == "high":
                lines.append("  high", style="red")
            lines.append("\n")
        lines.rstrip()
        return Panel(lines, title=f"Plan {done}/{len(plan.entries)}", title_align="left", border_style="cyan")

    def _card(self, card: _Card, *, live: bool) -> RenderableType:
        icon, label = _KINDS.get(card.kind, _KINDS["other"])
        title = Text.assemble((f" {icon} {label} ", "bold black on cyan"), " ", (card.title, "bold"))
        body: list[RenderableType] = []
        if card.locations:
            places = [
                f"{self._relative(str(loc.get('path')))}{':' + str(loc['line']) if loc.get('line') else ''}"
                for loc in card.locations
            ]
            body.append(Text.assemble(("at ", "dim"), (", ".join(places), "underline cyan")))
        for block in card.content:
            body.append(self._block(card, block, live=live))
        if card.asking is not None:
            buttons = Text("Allow this call?  ", style="bold yellow")
            for option in card.asking:
                buttons.append(f" {option.get('name')} ", style="reverse")
                buttons.append("  ")
            body.append(buttons)
        if card.permission is not None:
            asked, answer = card.permission
            body.append(
                Text.assemble(
                    ("▸ permission asked: ", "yellow"), asked, (" — answered: ", "yellow"), (answer, "bold")
                )
            )
        body += [Text(f"↳ through the editor: {note}", style="dim") for note in card.file_access]
        border = {"completed": "green", "failed": "red", "pending": "yellow"}.get(card.status, "blue")
        return Panel(
            Group(*body) if body else Text("(no content)", style="dim"),
            title=title,
            title_align="left",
            subtitle=_status(card.status, live=live),
            subtitle_align="right",
            border_style=border,
            box=box.ROUNDED,
        )

    def _block(self, card: _Card, block: dict[str, Any], *, live: bool) -> RenderableType:
        kind = block.get("type")
        if kind == "content":
            inner = block.get("content") or {}
            if inner.get("type") == "text":
                return Markdown(self._project_relative(str(inner.get("text", ""))))
            return Text(f"[{inner.get('type')} block]", style="dim")
        if kind == "diff":
            return _diff(block, self._relative(str(block.get("path"))), _line_of(card, block.get("path")))
        if kind == "terminal":
            return self._terminal(card, live=live)
        return Text(f"[{kind} block]", style="dim")

    def _terminal(self, card: _Card, *, live: bool) -> RenderableType:
        output = self._project_relative(card.output.removesuffix("\n"))
        lines = output.split("\n") if output else []
        if live and len(lines) > _LIVE_TAIL_LINES:
            lines = [f"… {len(lines) - _LIVE_TAIL_LINES} lines above", *lines[-_LIVE_TAIL_LINES:]]
        text = Text.from_ansi("\n".join(lines)) if lines else Text("(no output yet)", style="dim")
        if card.exited:
            failed = card.signal or card.exit_code != 0
            what = f"signal {card.signal}" if card.signal else f"exit {card.exit_code}"
            pill = Text(f" {what} ", style="bold white on red" if failed else "bold black on green")
        elif card.status == "pending":  # announced, waiting for permission: nothing has run yet
            pill = Text(" waiting ", style="bold black on yellow")
        else:
            pill = Text(" running ", style="bold black on yellow")
        return Panel(
            text, title="terminal", title_align="left", subtitle=pill, subtitle_align="right", box=box.SQUARE
        )

    def _project_relative(self, text: str) -> str:
        """Text as the project's own files would show it: the throw-away workspace's absolute
        prefix dropped (the demo's project lives in a temporary folder nobody needs to read)."""
        root = str(self.state.cwd)
        if root in ("", ".") or root not in text:
            return text
        import re

        # The folder itself (``/tmp/x/calc/`` heading a listing) becomes ``./``; paths in it lose it.
        text = re.sub(re.escape(root) + r"/?(?=[\s'\":,)]|$)", "./", text, flags=re.MULTILINE)
        return text.replace(root + "/", "")

    def _relative(self, path: str) -> str:
        """A path as an editor shows it: relative inside the workspace, absolute outside."""
        try:
            return str(Path(path).relative_to(self.state.cwd))
        except ValueError:
            return path


_KINDS = {
    "read": ("≡", "read"),
    "edit": ("✎", "edit"),
    "delete": ("✗", "delete"),
    "move": ("⇄", "move"),
    "search": ("⌕", "search"),
    "execute": ("$", "execute"),
    "think": ("✻", "think"),
    "fetch": ("⇣", "fetch"),
    "switch_mode": ("⇆", "mode"),
    "other": ("•", "tool"),
}
"""An icon and a label per tool kind (editors pick an icon by kind)."""


_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _status(status: str, *, live: bool) -> Text:
    if status == "in_progress":
        # A panel subtitle must be Text, so the spinner is drawn by hand (the region redraws every 0.1 s).
        mark = _SPINNER[int(time.monotonic() * 10) % len(_SPINNER)] if live else "◐"
        return Text.assemble((mark, "blue"), (" in progress", "blue"))
    marks = {
        "pending": ("○ pending", "yellow"),
        "completed": ("✓ completed", "green"),
        "failed": ("✗ failed", "red"),
    }
    label, style = marks.get(status, (status, "red"))
    return Text(label, style=style)


def _line_of(card: _Card, path: Any) -> int | None:
    """The line the card's location gives for ``path`` (the first changed line of a diff)."""
    for location in card.locations:
        if location.get("path") == path and isinstance(location.get("line"), int):
            line: int = location["line"]
            return line
    return None


def _diff(block: dict[str, Any], shown_path: str, changed_line: int | None) -> RenderableType:
    """A diff block as red and green lines, numbered when the card's location places the change."""
    old_text, new_text = block.get("oldText"), str(block.get("newText") or "")
    old, new = (old_text or "").splitlines(), new_text.splitlines()
    opcodes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    first_change = next((j1 for tag, _i1, _i2, j1, _j2 in opcodes if tag != "equal"), 0)
    start = changed_line - first_change if changed_line is not None else None
    table = Table.grid(padding=(0, 1))
    table.add_column(justify="right", style="dim")
    table.add_column(justify="right", style="dim")
    table.add_column()

    def row(old_index: int | None, new_index: int | None, line: Text) -> None:
        def number(index: int | None) -> str:
            return str(start + index) if start is not None and index is not None else ""

        table.add_row(number(old_index), number(new_index), line)

    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            for offset in range(i2 - i1):
                row(i1 + offset, j1 + offset, Text("  " + old[i1 + offset], style="dim"))
            continue
        removed = [Text("- " + line, style="red") for line in old[i1:i2]]
        added = [Text("+ " + line, style="green") for line in new[j1:j2]]
        if len(removed) == len(added):  # a line changed in place: mark the characters that changed
            for before, after in zip(removed, added, strict=True):
                _highlight_change(before, after)
        for offset, line in enumerate(removed):
            row(i1 + offset, None, line)
        for offset, line in enumerate(added):
            row(None, j1 + offset, line)
    header = Text.assemble(
        ("diff ", "dim"), (shown_path, "bold"), (" (new file)" if old_text is None else "", "dim")
    )
    return Group(header, table)


def _highlight_change(before: Text, after: Text) -> None:
    matcher = difflib.SequenceMatcher(a=before.plain[2:], b=after.plain[2:], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            before.stylize("bold reverse", i1 + 2, i2 + 2)
            after.stylize("bold reverse", j1 + 2, j2 + 2)

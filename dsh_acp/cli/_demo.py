"""``dsh-acp demo``: watch the agent work as an editor would, with no model, no key and no editor.

The demo makes a throw-away project (``_demo_script.WORKSPACE``: a module with a bug and its tests),
writes a scripted model that fixes the bug, and launches the real agent, ``python -m dsh_acp
--model script:FILE --mode default``, as a subprocess. The testing kit's client
(``dsh_acp.testing.AcpClient``) then plays the editor over real ACP on the agent's stdio: it
initializes with Zed's client capabilities (so commands stream into a live terminal), opens a
session, sends the prompt, answers the permission prompts and the agent's ``fs/*`` requests, and
the view draws what an agent panel shows as the updates arrive: messages and thoughts, tool-call
cards (title, kind, status, locations, diffs, live terminal output and its exit code), the plan and
the session title. At the end it reloads the session (``session/load``) and checks that the replay
rebuilds the same panel.

``--raw`` prints the JSON-RPC lines instead, both directions, marked ``->`` (editor to agent) and
``<-`` (agent to editor).

``rich`` is imported here and nowhere on the agent's own path: ``_main`` imports this module only
for the ``demo`` command, so the agent's cold start never pays for it. Neither does the demo need
the kit's test extras: the client runs without ``jsonschema`` or ``pytest`` (it validates against
the schema only when given one).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import orjson
from rich.console import Console

from dsh_acp.rpc._errors import INTERNAL_ERROR, ConnectionClosed, RpcError
from dsh_acp.testing import ZED_CAPABILITIES, AcpClient, WireLine

from ._demo_panel import PanelState
from ._demo_script import PERMISSION_CHOICES, PROMPT, demo_script, write_workspace
from ._demo_view import RawView, ReaderGone, RichView, View

__all__ = ["demo_main"]

_TURN_LIMIT_S = 60.0  # the scripted session takes seconds; a hung agent must not hang the demo


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
    view: View = RawView() if args.raw else RichView(Console(highlight=False))
    try:
        anyio.run(_demo, view)
    except BaseException as error:
        view.close()
        # anyio reports what ended its tasks in (nested) groups; the first decisive one tells why.
        leaves = list(_leaves(error))
        for kind in (KeyboardInterrupt, SystemExit, ReaderGone, DemoError):
            cause = next((leaf for leaf in leaves if isinstance(leaf, kind)), None)
            if isinstance(cause, KeyboardInterrupt):
                return 130
            if isinstance(cause, SystemExit):  # rich's answer to a closed pipe (`demo | head`)
                return cause.code if isinstance(cause.code, int) else 1
            if isinstance(cause, ReaderGone):
                return 1
            if isinstance(cause, DemoError):
                print(f"dsh-acp demo: {cause}", file=sys.stderr)
                return 1
        raise
    return 0


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


async def _demo(view: View) -> None:
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
        editor = _Editor(view)
        await editor.run(args, workspace)
        view.finished(time.monotonic() - started, editor.client.violations)


class _Editor:
    """The editor: the kit's client, with the demo's person answering the permission prompts and
    the view shown everything that passes."""

    def __init__(self, view: View) -> None:
        self._view = view
        self._answers = deque(PERMISSION_CHOICES)
        self._replay: PanelState | None = None  # set while session/load replays the session
        self._client: AcpClient | None = None

    @property
    def client(self) -> AcpClient:
        assert self._client is not None, "run() starts the client"
        return self._client

    async def run(self, args: Sequence[str], cwd: Path) -> None:
        """Start the agent, play the session, and end the agent the way editors end it: by
        closing its stdin."""
        # The scripted session runs `python3`; put this interpreter's directory first on the PATH
        # so that it is the one found, even from a virtualenv that was never activated.
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        try:
            async with AsyncExitStack() as stack:
                try:
                    self._client = await stack.enter_async_context(
                        AcpClient.subprocess(
                            args,
                            env={"PATH": path},
                            capture_stderr=True,
                            on_update=self._update,
                            on_agent_request=self._agent_request,
                            on_line=self._line,
                        )
                    )
                except OSError as error:
                    raise DemoError(f"cannot start the agent: {error}") from None
                await self._play(cwd)
        except TimeoutError as error:  # the client's: the agent outlived its closed stdin
            raise DemoError(str(error)) from None
        if self.client.exit_code != 0:
            raise DemoError(self._describe_exit())

    async def _play(self, cwd: Path) -> None:
        try:
            with anyio.fail_after(_TURN_LIMIT_S):
                async with anyio.create_task_group() as group:
                    group.start_soon(self._view.animate)
                    await self._session(cwd)
                    group.cancel_scope.cancel()  # the animation
        except TimeoutError:
            raise DemoError(f"the agent did not finish the session within {_TURN_LIMIT_S:.0f} s") from None

    async def _session(self, cwd: Path) -> None:
        """The editor's side of the story: handshake, a session, one prompt, then a reload."""
        init = await self._request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": ZED_CAPABILITIES,
                "clientInfo": {"name": "dsh-acp-demo", "title": "dsh-acp demo", "version": "1"},
            },
        )
        session = await self._request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id = session["sessionId"]
        self._view.session_opened(init, session)
        self._view.user_prompt(PROMPT)
        answer = await self._request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]}
        )
        stop = answer.get("stopReason")
        self._view.turn_ended(stop)
        if stop != "end_turn":
            raise DemoError(f"the prompt turn ended with stopReason {stop!r}, not 'end_turn'")
        # An editor reopening the session gets it replayed; the replay must rebuild the same panel.
        self._replay = PanelState(cwd)  # the replay includes the user's prompt, as user_message_chunk
        await self._request("session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []})
        replay, self._replay = self._replay, None
        self._view.replayed(replay)

    async def _request(self, method: str, params: Any) -> Any:
        try:
            return await self.client.request(method, params)
        except RpcError as error:
            raise DemoError(f"the agent answered {method} with error {error.code}: {error.message}") from None
        except ConnectionClosed:
            process = self.client.process
            with anyio.move_on_after(1):  # let the exit code and last stderr line arrive
                if process is not None:
                    await process.wait()
            raise DemoError(self._describe_exit(f" before answering {method}")) from None

    def _describe_exit(self, when: str = "") -> str:
        """``the agent exited with code 3 before answering initialize (it said: ...)``."""
        process = self.client.process
        code = None if process is None else process.returncode
        said = f" (it said: {self.client.stderr_lines[-1]})" if self.client.stderr_lines else ""
        return f"the agent exited{'' if code is None else f' with code {code}'}{when}{said}"

    # -- what the agent sends -------------------------------------------------------------------

    def _line(self, line: WireLine) -> None:
        self._view.wire("->" if line.direction == "client" else "<-", line.raw)

    def _update(self, update: dict[str, Any]) -> None:
        if self._replay is not None:
            self._replay.apply(update)
        else:
            self._view.update(update)

    def _agent_request(self, method: str, params: Any) -> Awaitable[Any] | None:
        if method == "session/request_permission":
            return self._permission(params)
        if method in ("fs/read_text_file", "fs/write_text_file"):
            # Answered by the client as an editor with no unsaved buffers: from and to the disk.
            self._view.file_access(method, params["path"])
        return None

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

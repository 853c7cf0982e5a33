"""What ``dsh-acp demo`` shows as the session goes: the agent panel drawn with rich (``RichView``), or
the JSON-RPC lines themselves (``RawView``, ``--raw``).

Without a terminal (CI, a pipe) rich prints plain text, and the cards appear once finished instead
of updating in place.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.rule import Rule
from rich.spinner import Spinner
from rich.text import Text

from ._demo_draw import Drawing
from ._demo_panel import Card, Message, PanelState, differences

__all__ = ["Direction", "RawView", "ReaderGone", "RichView", "View"]

_PERMISSION_PAUSE_S = 0.8  # in a terminal, let the viewer see the buttons before "clicking"

Direction = Literal["->", "<-"]


class ReaderGone(Exception):
    """Whoever read our output closed the pipe (``demo --raw | head``): stop, quietly."""


class View:
    """What the demo shows; the default shows nothing (each view overrides what it draws)."""

    def intro(self, workspace: Path, command: str) -> None: ...
    def wire(self, direction: Direction, raw: bytes) -> None: ...
    def session_opened(self, init: dict[str, Any], session: dict[str, Any]) -> None: ...
    def user_prompt(self, text: str) -> None: ...
    def update(self, update: dict[str, Any]) -> None: ...
    def file_access(self, method: str, path: str) -> None: ...
    def turn_ended(self, stop_reason: str | None) -> None: ...
    def replayed(self, replay: PanelState) -> None: ...
    def finished(self, seconds: float, broken_rules: Sequence[str]) -> None:
        """The session is over; ``broken_rules`` are the agent's messages that break a rule real
        clients depend on (the kit's ``wire_problems``)."""

    def close(self) -> None: ...

    async def permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]], chosen: dict[str, Any]
    ) -> None: ...

    async def animate(self) -> None: ...


class RawView(View):
    """``--raw``: the wire itself, one JSON-RPC message a line, as it passes."""

    def wire(self, direction: Direction, raw: bytes) -> None:
        try:
            sys.stdout.write(f"{direction} {raw.decode(errors='replace')}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            # Point stdout at /dev/null so the interpreter's final flush does not complain again; not
            # an OSError, so that the connection does not mistake it for the agent's pipe breaking.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise ReaderGone from None


class RichView(View):
    """The agent panel, drawn with rich.

    Finished entries (a message, a completed card, a plan) are printed once, in the order the agent
    produced them. In a terminal, the unfinished ones — a running command, a card waiting for
    permission — are drawn below them in a live region that updates in place; elsewhere (a pipe) there
    is no live region, and each entry appears once it is finished.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = PanelState(Path())  # the workspace is set by intro()
        self.draw = Drawing(Path())
        self._printed = 0  # entries of state.timeline already printed
        self._live: Live | None = None
        self._spinner = Spinner("dots", text=Text(" working", style="dim"), style="cyan")
        self._shown_commands: list[str] = []

    # -- the story ----------------------------------------------------------------------------

    def intro(self, workspace: Path, command: str) -> None:
        self.state.cwd = self.draw.cwd = workspace
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
                card.file_access.append(f"{method} {self.draw.relative(path)}")
                self._refresh()
                return

    def turn_ended(self, stop_reason: str | None) -> None:
        for card in self.state.open_cards():
            self.state.problems.append(f"{card.call_id} was still {card.status} when the prompt was answered")
        self._flush(everything=True)
        self.close()
        if self.state.plan is not None:
            self._print(self.draw.plan(self.state.plan))
        if self.state.title:  # an editor shows it on the thread's tab; it came with the turn
            self._print(Rule(Text.assemble(("Session title: ", "dim"), (self.state.title, "bold"))))
        style = "green" if stop_reason == "end_turn" else "red"
        footer = Text.assemble(("■ ", style), "turn ended: ", (str(stop_reason), f"bold {style}"))
        if self.state.usage:
            used, size = self.state.usage
            footer.append(f"  ·  context {used:,} / {size:,} tokens", style="dim")
        self.console.print(footer)

    def replayed(self, replay: PanelState) -> None:
        cards = len(replay.cards)
        found = differences(self.state.snapshot(), replay.snapshot())
        found += [f"in the replay: {problem}" for problem in replay.problems]
        if not found:
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
        for difference in found:
            self.console.print(Text(f"  - {difference}", "yellow"))

    def finished(self, seconds: float, broken_rules: Sequence[str]) -> None:
        for problem in [*self.state.problems, *broken_rules]:
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
            if isinstance(entry, Card):
                done = entry.finished
            else:  # a message may still grow while it is the last entry; a plan is final at once
                done = not isinstance(entry, Message) or self._printed < len(timeline) - 1
            if not (done or everything):
                break
            self._print(self.draw.entry(entry, live=False))
            self._printed += 1
        self._refresh()

    def _live_region(self) -> RenderableType:
        # The plan stays at the bottom, updated in place, until the turn ends and it is printed once.
        pending = [self.draw.entry(entry, live=True) for entry in self.state.timeline[self._printed :]]
        plan = [self.draw.plan(self.state.plan)] if self.state.plan is not None else []
        return Group(*pending, *plan, self._spinner)

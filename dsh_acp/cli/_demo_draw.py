"""How the demo draws what its editor holds: a message, a tool-call card (its locations, content,
diff, terminal and the permission asked), the plan; with rich, as an editor's agent panel looks.

Paths show as an editor shows them: relative inside the project, which lives in a temporary folder
nobody needs to read.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ._demo_panel import Card, Entry, Plan

__all__ = ["Drawing"]

_LIVE_TAIL_LINES = 12  # a running terminal shows its last lines, as a panel of fixed height would


class Drawing:
    """Draws the entries of a panel whose project is ``cwd``."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def entry(self, entry: Entry, *, live: bool) -> RenderableType:
        if isinstance(entry, Card):
            return self._card(entry, live=live)
        if isinstance(entry, Plan):
            return self.plan(entry)
        if entry.kind == "user_message_chunk":
            return Panel(
                Text(entry.text), title="You", title_align="left", border_style="blue", box=box.ROUNDED
            )
        if entry.kind == "agent_thought_chunk":
            return Padding(Text.assemble(("✻ Thinking  ", "magenta"), (entry.text, "dim italic")), (0, 1))
        return Padding(Markdown(entry.text), (0, 1))

    def plan(self, plan: Plan) -> RenderableType:
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

    def _card(self, card: Card, *, live: bool) -> RenderableType:
        icon, label = _KINDS.get(card.kind, _KINDS["other"])
        title = Text.assemble((f" {icon} {label} ", "bold black on cyan"), " ", (card.title, "bold"))
        body: list[RenderableType] = []
        if card.locations:
            places = [
                f"{self.relative(str(loc.get('path')))}{':' + str(loc['line']) if loc.get('line') else ''}"
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

    def _block(self, card: Card, block: dict[str, Any], *, live: bool) -> RenderableType:
        kind = block.get("type")
        if kind == "content":
            inner = block.get("content") or {}
            if inner.get("type") == "text":
                return Markdown(self._project_relative(str(inner.get("text", ""))))
            return Text(f"[{inner.get('type')} block]", style="dim")
        if kind == "diff":
            return _diff(block, self.relative(str(block.get("path"))), _line_of(card, block.get("path")))
        if kind == "terminal":
            return self._terminal(card, live=live)
        return Text(f"[{kind} block]", style="dim")

    def _terminal(self, card: Card, *, live: bool) -> RenderableType:
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
        root = str(self.cwd)
        if root in ("", ".") or root not in text:
            return text
        # The folder itself (``/tmp/x/calc/`` heading a listing) becomes ``./``; paths in it lose it.
        text = re.sub(re.escape(root) + r"/?(?=[\s'\":,)]|$)", "./", text, flags=re.MULTILINE)
        return text.replace(root + "/", "")

    def relative(self, path: str) -> str:
        """A path as an editor shows it: relative inside the workspace, absolute outside."""
        try:
            return str(Path(path).relative_to(self.cwd))
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


def _line_of(card: Card, path: Any) -> int | None:
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

    for old_index, new_index, line in _diff_rows(old, new, opcodes):
        table.add_row(_number(start, old_index), _number(start, new_index), line)
    header = Text.assemble(
        ("diff ", "dim"), (shown_path, "bold"), (" (new file)" if old_text is None else "", "dim")
    )
    return Group(header, table)


def _number(start: int | None, index: int | None) -> str:
    """A line's number in the file, when the card's location places the diff."""
    return str(start + index) if start is not None and index is not None else ""


def _diff_rows(
    old: list[str], new: list[str], opcodes: Sequence[tuple[str, int, int, int, int]]
) -> Iterator[tuple[int | None, int | None, Text]]:
    """Each line of the diff: its index in the old text and in the new (``None`` where it is not
    in one of them), as drawn."""
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            for offset in range(i2 - i1):
                yield i1 + offset, j1 + offset, Text("  " + old[i1 + offset], style="dim")
            continue
        removed = [Text("- " + line, style="red") for line in old[i1:i2]]
        added = [Text("+ " + line, style="green") for line in new[j1:j2]]
        if len(removed) == len(added):  # a line changed in place: mark the characters that changed
            for before, after in zip(removed, added, strict=True):
                _highlight_change(before, after)
        for offset, line in enumerate(removed):
            yield i1 + offset, None, line
        for offset, line in enumerate(added):
            yield None, j1 + offset, line


def _highlight_change(before: Text, after: Text) -> None:
    matcher = difflib.SequenceMatcher(a=before.plain[2:], b=after.plain[2:], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            before.stylize("bold reverse", i1 + 2, i2 + 2)
            after.stylize("bold reverse", j1 + 2, j2 + 2)

"""Applied hunks: the diff that a write or an edit actually made, built without diffing files.

A hunk is whole lines of the old text (``old_text``, starting at 1-based line ``old_start``) and
what replaced them (``new_text``, at ``new_start`` in the new text), with up to ``CONTEXT``
unchanged lines on each side. ``apply_hunks(old, hunks) == new`` holds for every result here.

An edit knows where it changed the text, so ``edit_hunks`` only looks at the edit sites and the
lines around them: its cost follows the size of the edit, not of the file. A write only has the
two texts, so ``diff_hunks`` trims their common head and tail at memory speed and runs
``difflib`` on what is left, or, when that is too large for difflib's worst case, reports the
changed region as one hunk.

``Splice`` is the text an edit produces, handed out a chunk at a time: a large file's edit then
never holds its new text whole (building it is a copy of the file into fresh memory, and
encoding it for the disk would be another).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypedDict

__all__ = [
    "CONTEXT",
    "MAX_DIFF_LINES",
    "Hunk",
    "Splice",
    "apply_hunks",
    "diff_hunks",
    "edit_hunks",
    "find_sites",
    "first_changed_line",
    "line_start",
]

CONTEXT = 3
MAX_DIFF_LINES = 20_000
"""Lines (old + new) of a changed region above which difflib is not run. With its "autojunk"
heuristic (lines in over 1 % of the text do not anchor matches) difflib stays well under a
second at this size even on repetitive input (measured: 0.25 s for 20 000 lines of 250
distinct values); without it, 10 000 lines of 10 distinct values take over 2 s."""
_BLOCK = 1 << 16


class Hunk(TypedDict):
    """One changed region, as stored in a tool result's ``meta``."""

    old_start: int
    new_start: int
    old_text: str
    new_text: str


def line_start(text: str, line: int) -> int:
    """The offset at which 1-based ``line`` starts, or -1 when the text has fewer lines.

    Counts newlines a block at a time (C speed) and only steps through the last block.
    """
    need, pos = line - 1, 0
    while need > 0:
        end = min(pos + _BLOCK, len(text))
        found = text.count("\n", pos, end)
        if found >= need:
            for _ in range(need):
                pos = text.index("\n", pos) + 1
            return pos
        if end == len(text):
            return -1
        need, pos = need - found, end
    return pos


def find_sites(text: str, old: str, *, limit: int | None = None) -> list[int]:
    """Offsets of the non-overlapping occurrences of ``old``, left to right (at most ``limit``)."""
    sites: list[int] = []
    pos = text.find(old)
    while pos >= 0 and (limit is None or len(sites) < limit):
        sites.append(pos)
        pos = text.find(old, pos + len(old))
    return sites


class Splice:
    """``text`` with ``new`` in place of ``old`` at ``sites`` (as ``find_sites`` found them: the
    first occurrences, left to right), without building the new text.

    It has a length, ``chunks()`` hands it out in order a slice at a time, ``c in splice`` tells
    whether one character occurs in it, and ``str()`` builds it whole for a consumer that needs
    that. ``head`` and ``tail`` are how many characters at its start and end are ``text``'s.
    """

    MAX_PIECES = 1024
    """Past this many edit sites (a ``replace_all`` of a common word) the pieces would cost more
    in Python than ``str.replace`` costs at C speed, so the text is built once instead."""

    def __init__(self, text: str, sites: Sequence[int], old: str, new: str) -> None:
        self._build = (text, old, new, len(sites))
        self._length = len(text) + len(sites) * (len(new) - len(old))
        self.head = sites[0] if sites else len(text)
        self.tail = len(text) - sites[-1] - len(old) if sites else 0
        if len(sites) > self.MAX_PIECES:
            built = text.replace(old, new, len(sites))
            self._pieces = [(built, 0, len(built))]
            return
        # (source, start, end): the new text is the concatenation of source[start:end].
        pieces: list[tuple[str, int, int]] = []
        cursor = 0
        for site in sites:
            pieces += ((text, cursor, site), (new, 0, len(new)))
            cursor = site + len(old)
        pieces.append((text, cursor, len(text)))
        self._pieces = [piece for piece in pieces if piece[2] > piece[1]]

    def __len__(self) -> int:
        return self._length

    def __str__(self) -> str:
        # One copy at C speed; joining slices would copy every character twice.
        text, old, new, count = self._build
        return text.replace(old, new, count)

    def __contains__(self, char: str) -> bool:
        if len(char) != 1:  # a longer string could straddle two pieces
            raise ValueError("only one character can be looked for in a Splice")
        # find with bounds scans the source in place, with no slice copied.
        return any(source.find(char, start, end) >= 0 for source, start, end in self._pieces)

    def chunks(self, size: int = _BLOCK, start: int = 0, stop: int | None = None) -> Iterator[str]:
        """The new text from ``start`` to ``stop`` (default: its end) in order, ``size``
        characters at a time: only the last chunk may be shorter."""
        stop = len(self) if stop is None else min(stop, len(self))
        parts: list[str] = []
        missing = size  # characters the chunk being assembled still lacks
        offset = 0  # where the current piece starts in the new text
        for source, begin, end in self._pieces:
            # The part of this piece that falls in [start, stop), in the source's offsets.
            low, high = begin + max(0, start - offset), begin + min(end - begin, stop - offset)
            offset += end - begin
            while low < high:
                take = min(missing, high - low)
                parts.append(source[low : low + take])
                low, missing = low + take, missing - take
                if not missing:
                    yield parts[0] if len(parts) == 1 else "".join(parts)
                    parts, missing = [], size
            if offset >= stop:
                break
        if parts:
            yield "".join(parts)


def _back(text: str, pos: int, lines: int) -> int:
    """The start of the line ``lines`` above the one holding ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    for _ in range(lines):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _forward(text: str, end: int, lines: int) -> int:
    """The end of the line holding ``end - 1`` (``end`` itself at a line start), plus ``lines``
    more lines."""
    if end > 0 and text[end - 1] != "\n":
        newline = text.find("\n", end)
        end = len(text) if newline < 0 else newline + 1
    for _ in range(lines):
        if end >= len(text):
            break
        newline = text.find("\n", end)
        end = len(text) if newline < 0 else newline + 1
    return end


def edit_hunks(
    text: str,
    sites: Sequence[int],
    old: str,
    new: str,
    *,
    first_line: int,
    max_hunks: int = 100,
    max_chars: int = 256 * 1024,
) -> tuple[list[Hunk], int]:
    """The hunks of replacing ``old`` by ``new`` at ``sites`` (offsets in ``text``, ascending).

    ``first_line`` is the 1-based line of ``sites[0]`` (the caller counted it while locating).
    Sites whose context overlaps share a hunk. A card has room for ``max_hunks`` hunks of
    ``max_chars`` old text in all (a ``replace_all`` over a large file can touch every line):
    returns the hunks and how many sites they leave out.
    """
    hunks: list[Hunk] = []
    shift = new.count("\n") - old.count("\n")
    added = shown = 0  # lines the hunks so far added to the new text; old text they hold
    line, previous, index = first_line, sites[0] if sites else 0, 0
    while index < len(sites) and len(hunks) < max_hunks and shown < max_chars:
        line += text.count("\n", previous, sites[index])
        start = _back(text, sites[index], CONTEXT)
        start_line = line - text.count("\n", start, sites[index])
        end = _forward(text, sites[index] + len(old), CONTEXT)
        group = [sites[index]]
        while (
            index + len(group) < len(sites)
            and shown + end - start < max_chars
            and _back(text, sites[index + len(group)], CONTEXT) <= end
        ):
            group.append(sites[index + len(group)])
            end = _forward(text, group[-1] + len(old), CONTEXT)
        pieces: list[str] = []
        cursor = start
        for site in group:
            pieces += (text[cursor:site], new)
            cursor = site + len(old)
        pieces.append(text[cursor:end])
        hunks.append(
            Hunk(
                old_start=start_line,
                new_start=start_line + added,
                old_text=text[start:end],
                new_text="".join(pieces),
            )
        )
        added, shown = added + shift * len(group), shown + end - start
        line += text.count("\n", sites[index], group[-1])
        previous, index = group[-1], index + len(group)
    return hunks, len(sites) - index


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    pos = 0
    while pos < limit and a[pos : pos + _BLOCK] == b[pos : pos + _BLOCK]:
        pos += _BLOCK
    end = min(pos + _BLOCK, limit)
    while pos < end and a[pos] == b[pos]:
        pos += 1
    return min(pos, limit)


def _common_suffix(a: str, b: str, limit: int) -> int:
    size = 0
    while size < limit:
        step = min(_BLOCK, limit - size)
        if a[len(a) - size - step : len(a) - size] != b[len(b) - size - step : len(b) - size]:
            break
        size += step
    else:
        return size
    while size < limit and a[len(a) - size - 1] == b[len(b) - size - 1]:
        size += 1
    return size


def _lines(text: str) -> list[str]:
    # Not str.splitlines: it also splits on \r, \f, \u2028... and line numbers count "\n" only.
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def diff_hunks(old: str, new: str, *, max_lines: int = MAX_DIFF_LINES) -> list[Hunk]:
    """The hunks that turn ``old`` into ``new``: a line diff of the region between their common
    head and tail, or that region as one hunk when it has more than ``max_lines`` lines."""
    if old == new:
        return []
    head = old.rfind("\n", 0, _common_prefix(old, new)) + 1
    tail = len(old) - _common_suffix(old, new, min(len(old), len(new)) - head)
    if tail > 0 and old[tail - 1] != "\n":  # the common tail starts at a line start too
        newline = old.find("\n", tail)
        tail = len(old) if newline < 0 else newline + 1
    start = _back(old, head, CONTEXT)
    old_end = _forward(old, tail, CONTEXT)
    new_end = old_end - len(old) + len(new)
    base = old.count("\n", 0, start) + 1
    if old.count("\n", start, old_end) + new.count("\n", start, new_end) > max_lines:
        return [
            Hunk(old_start=base, new_start=base, old_text=old[start:old_end], new_text=new[start:new_end])
        ]
    a, b = _lines(old[start:old_end]), _lines(new[start:new_end])
    hunks: list[Hunk] = []
    import difflib  # only for write's real diff: edits build hunks without it

    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(CONTEXT):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        hunks.append(
            Hunk(
                old_start=base + i1,
                new_start=base + j1,
                old_text="".join(a[i1:i2]),
                new_text="".join(b[j1:j2]),
            )
        )
    return hunks


def first_changed_line(hunks: Sequence[Hunk]) -> int:
    """The 1-based line of the new text where the first hunk's change begins (past its context),
    for a UI to scroll to."""
    if not hunks:
        return 1
    old, new = hunks[0]["old_text"], hunks[0]["new_text"]
    same = _common_prefix(old, new)
    return hunks[0]["new_start"] + new.count("\n", 0, same)


def apply_hunks(old: str, hunks: Sequence[Hunk]) -> str:
    """Apply ``hunks`` (ascending, as produced here) to ``old``; raises ``ValueError`` when a
    hunk's old text is not where it says."""
    for hunk in reversed(hunks):
        at = line_start(old, hunk["old_start"])
        if at < 0 or not old.startswith(hunk["old_text"], at):
            raise ValueError(f"hunk at line {hunk['old_start']} does not match the old text")
        old = old[:at] + hunk["new_text"] + old[at + len(hunk["old_text"]) :]
    return old

"""What a session has read: a print of each file's text (hashes of its chunks), so that ``write``
and ``edit`` can refuse a file that changed since, and the policy can refuse one never read."""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

from dsh_tools import ToolExecution

from . import _hunks

__all__ = ["ReadTracker", "TextPrint", "text_print", "tracker"]

_HASH_CHUNK = 1 << 16


class TextPrint(NamedTuple):
    """A text's length and the hash of each of its ``_HASH_CHUNK``-character chunks."""

    length: int
    chunks: tuple[int, ...]


def text_print(
    content: str | _hunks.Splice, base: TextPrint | None = None, *, size: int = _HASH_CHUNK
) -> TextPrint:
    """The print of ``content``, the same for a text and a splice that spells it.

    ``base``, the print of the text a splice was made from, spares hashing what the splice
    kept: the chunks wholly inside its head, and inside its tail when the length is the same
    (the tail then sits at the same offsets).
    """
    # CRLF is folded so that a backend's line-ending conversion is not mistaken for a change
    # (rare: a backend hands over LF text, so only a lone "\r" gets here). A splice without
    # "\r" shares its head and tail with its base even if the base was folded: a fold there
    # would have left a "\r" in them.
    if "\r" in content:
        content, base = str(content).replace("\r\n", "\n"), None
    # Python's str hash (SipHash, several GB/s) is the cheapest full pass over the text and is
    # stable for the life of the process, which outlives any session's tracker. It is taken
    # over fixed-size chunks so that a splice can be hashed without being built.
    if isinstance(content, str):
        chunks = (content[start : start + size] for start in range(0, len(content), size))
        return TextPrint(len(content), tuple(map(hash, chunks)))
    if base is None:
        return TextPrint(len(content), tuple(map(hash, content.chunks(size))))
    head = content.head // size  # chunks wholly inside the head
    if base.length == len(content):
        tail = max(head, -(-(len(content) - content.tail) // size))  # the first chunk in the tail
        kept = base.chunks[tail:]
    else:
        tail, kept = -(-len(content) // size), ()
    changed = tuple(map(hash, content.chunks(size, head * size, tail * size)))
    return TextPrint(len(content), base.chunks[:head] + changed + kept)


@dataclass(frozen=True, slots=True)
class _Seen:
    text: TextPrint
    """The print of the text the session saw."""
    stamp: Hashable | None
    """The backend's ``fingerprint`` of the file taken before that text was read, if any."""


class ReadTracker:
    """What this session has read: for each file (by real path), a print of its text (hashes of
    its chunks) and, when the backend gives one, a fingerprint of the file.

    Kept in the session's services (``services.setdefault(ReadTracker, ReadTracker)``): ``read``
    records, ``write`` and ``edit`` record what they wrote, ``fs_policy`` asks whether a file was
    read, and ``write``/``edit`` refuse a file whose text differs from what was recorded.

    The file fingerprint (``FileSystem.fingerprint``, a stat for the local disk) only saves
    work: when the one taken after the current read equals the one taken before the recorded
    read, the file provably did not change in between and its text is not hashed again. In
    every other case (no fingerprint, a file touched or replaced, times too recent to prove
    anything) the texts are compared.
    """

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def record(
        self,
        path: str,
        content: str | _hunks.Splice,
        stamp: Hashable | None = None,
        *,
        base: TextPrint | None = None,
    ) -> None:
        """Remember ``content`` as what the session last saw of ``path``.

        ``stamp`` is the backend's fingerprint of the file taken *before* ``content`` was read
        from it (so a change after it shows); leave it out for text the tools wrote, as one
        taken after a write could already describe someone else's change. For a splice,
        ``base`` is the print of the text it was made from (``seen`` of it), to hash less.
        """
        self._seen[os.path.realpath(path)] = _Seen(text_print(content, base), stamp)

    def has_read(self, path: str) -> bool:
        """Whether the session has read (or written) ``path``."""
        return os.path.realpath(path) in self._seen

    def seen(self, path: str) -> TextPrint | None:
        """The print of what the session last saw of ``path``; right after ``changed`` said no,
        it is the print of the text that was checked."""
        seen = self._seen.get(os.path.realpath(path))
        return None if seen is None else seen.text

    def changed(self, path: str, content: str, stamp: Hashable | None = None) -> bool:
        """Whether ``content`` (the file's text now) differs from what was recorded.

        ``stamp`` is the backend's fingerprint of the file taken *after* ``content`` was read.
        """
        seen = self._seen.get(os.path.realpath(path))
        if seen is None:
            return False
        if seen.stamp is not None and seen.stamp == stamp:
            return False  # the backend proves that the file did not change since the recorded read
        return seen.text != text_print(content)


def tracker(execution: ToolExecution) -> ReadTracker:
    return execution.services.setdefault(ReadTracker, ReadTracker)

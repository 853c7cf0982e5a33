"""One output stream of a command in bounded memory: what the model sees, and the rest on disk.

The model gets the head and the tail of the output it has not read yet (its *window*), with a
marker for what was left out; the whole stream goes to a private spill file as soon as it
outgrows head + tail, so the marker can say where to find it. Small outputs never touch disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["StreamCapture", "incomplete_suffix"]


def incomplete_suffix(data: bytes | bytearray) -> int:
    """How many bytes at the end of ``data`` begin a UTF-8 character that is not complete yet."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: the lead is further back
            continue
        need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
        return back if need > back else 0
    return 0


def _continuations(data: bytes | bytearray) -> int:
    """How many bytes at the start of ``data`` belong to a character that began before it."""
    count = 0
    while count < min(3, len(data)) and data[count] & 0xC0 == 0x80:
        count += 1
    return count


class StreamCapture:
    """The bounded capture of one stream (``label`` is ``"stdout"`` or ``"stderr"``).

    ``feed`` and ``take`` run on the session's event loop (a background command is pumped by a task).
    ``spill_path`` is called at most once, when the stream first outgrows ``head + tail``; with
    none the stream is never saved, and ``note`` says where else it can be found.
    """

    def __init__(
        self,
        label: str,
        *,
        head: int,
        tail: int,
        spill_path: Callable[[], str] | None,
        spill_limit: int | None = None,
        note: Callable[[], str] | None = None,
    ) -> None:
        self.label = label
        self.total = 0
        """Bytes received so far."""
        self.path: str | None = None
        """The spill file, once there is one."""
        self._head_max, self._tail_max = head, tail
        self._head, self._tail = bytearray(), bytearray()
        self._size = 0  # bytes in the window, including those dropped between head and tail
        self._spill_path = spill_path
        self._elsewhere = note
        self._spill_limit = spill_limit
        self._early: bytearray | None = bytearray()  # the whole stream until a spill file exists
        self._fd = -1
        self._spilled = 0
        self._spill_problem: str | None = None

    def feed(self, data: bytes) -> None:
        """Add a chunk of output."""
        self.total += len(data)
        self._spill(data)
        self._size += len(data)
        room = self._head_max - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if len(data) >= self._tail_max:  # a view: the tail is copied once, not sliced out first
            self._tail[:] = memoryview(data)[len(data) - self._tail_max :]
        elif data:
            self._tail += data
            del self._tail[: max(0, len(self._tail) - self._tail_max)]

    def take(self, *, final: bool) -> str:
        """The window as text (head, marker, tail), and start a new window.

        Cuts fall on character boundaries; bytes that are not UTF-8 are shown as ``\\xNN``.
        Unless ``final``, an incomplete character at the end waits for the next window instead of
        being mangled.
        """
        head, tail = self._head, self._tail
        dropped = self._size - len(head) - len(tail)
        if not dropped:
            head += tail
            tail = bytearray()
        carry = 0 if final else incomplete_suffix(tail or head)
        if dropped:
            cut, skip = incomplete_suffix(head), _continuations(tail)
            dropped += cut + skip
            text = (
                head[: len(head) - cut].decode("utf-8", "backslashreplace")
                + f"\n[... {dropped} bytes omitted; {self._note()} ...]\n"
                + tail[skip : len(tail) - carry].decode("utf-8", "backslashreplace")
            )
        else:
            text = head[: len(head) - carry].decode("utf-8", "backslashreplace")
        rest = (tail or head)[len(tail or head) - carry :]
        self._head, self._tail, self._size = bytearray(rest), bytearray(), len(rest)
        return text

    def close(self) -> None:
        """Close the spill file (it stays on disk; the session removes it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _note(self) -> str:
        if self._spill_path is None:
            return self._elsewhere() if self._elsewhere is not None else f"{self.label} was not saved"
        if self._spill_problem is not None:
            return self._spill_problem
        if self._spill_limit is not None and self.total > self._spill_limit:
            return f"the first {self._spill_limit} bytes of {self.label} were saved to {self.path}"
        return f"full {self.label} saved to {self.path}"

    def _spill(self, data: bytes) -> None:
        if self._spill_path is None:
            return
        if self._early is not None:
            self._early += data
            if len(self._early) <= self._head_max + self._tail_max:
                return  # the window still holds all of it
            data, self._early = bytes(self._early), None
            try:
                self.path = self._spill_path()
                # O_EXCL: never write through a file (or symlink) someone else put there.
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                self._fd = os.open(self.path, flags, 0o600)
            except OSError as error:
                self._spill_problem = f"{self.label} could not be saved: {error}"
                return
        if self._fd < 0:
            return
        if self._spill_limit is not None:
            data = data[: max(0, self._spill_limit - self._spilled)]
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
                self._spilled += written
        except OSError as error:
            self._spill_problem = f"{self.label} could not be saved past byte {self._spilled}: {error}"
            os.close(self._fd)
            self._fd = -1

"""What is kept of a tool's output: the bounded text of a result the model sees, and the head and
tail of what a command printed."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_tools import ContentBlock, TextBlock, bound_text, shown_text, text_of

__all__ = ["Printed", "model_content"]


class Printed:
    """What a command printed, head and tail within a budget: shown fenced to a client with no
    live terminal if the call is cancelled (else the result shows the output)."""

    def __init__(self, head: int, tail: int) -> None:
        self._room, self._tail_max = head, tail
        self._head: list[str] = []
        self._tail = ""
        self._dropped = 0

    def feed(self, text: str) -> None:
        if self._room > 0:
            self._head.append(text[: self._room])
            text = text[self._room :]
            self._room -= len(self._head[-1])
        if text:
            kept = self._tail + text
            self._dropped += max(0, len(kept) - self._tail_max)
            self._tail = kept[-self._tail_max :]

    def text(self) -> str:
        marker = f"\n[... {self._dropped} characters omitted ...]\n" if self._dropped else ""
        return "".join(self._head) + marker + self._tail


def model_content(content: Sequence[ContentBlock], head: int, tail: int) -> tuple[ContentBlock, ...]:
    """Whatever a tool returned, the model sees at most head + tail bytes of its text, and text
    that encodes (lone surrogates, say from an OS name, escaped as ``shown_text`` does)."""
    content = [_encodable(block) for block in content]
    texts = [block for block in content if isinstance(block, TextBlock)]
    total = sum(len(block.text) for block in texts)
    if total <= head + tail and sum(len(block.text.encode()) for block in texts) <= head + tail:
        return tuple(content)
    joined = text_of(texts)
    others = [block for block in content if not isinstance(block, TextBlock)]
    return (TextBlock(text=bound_text(joined, head=head, tail=tail)), *others)


def _encodable(block: ContentBlock) -> ContentBlock:
    if isinstance(block, TextBlock):
        shown = shown_text(block.text)
        if shown is not block.text:
            return block.model_copy(update={"text": shown})
    return block

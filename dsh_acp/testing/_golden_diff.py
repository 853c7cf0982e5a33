"""How two golden transcripts differ, for a person: the changed messages first, field by field
(inside a long text, the change itself is marked ``[-old-]{+new+}`` with a little of what
surrounds it), then a short context, each line cut to what matters."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["golden_diff"]

_SHORT = 60
"""A value this long or shorter is shown whole, on one line with its counterpart."""
_AROUND = 40
"""Characters of context on each side of a change inside a long text."""
_CHANGE = 120
"""Characters of a changed stretch shown, on each side."""
_LINE = 150
"""Characters of a context line shown."""
_MAX_FIELDS = 12
"""Changed fields listed per message; the rest are counted."""


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _parsed(line: str) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return line


def _label(message: Any) -> str:
    """What a message is, in a few words: its method, update kind and tool call, or what it answers."""
    if not isinstance(message, Mapping):
        return "a line that is not JSON"
    params = message.get("params")
    update = params.get("update") if isinstance(params, Mapping) else None
    if isinstance(update, Mapping):
        call = f" {update['toolCallId']}" if "toolCallId" in update else ""
        return f"{message.get('method')} {update.get('sessionUpdate')}{call}"
    if "method" in message:
        asked = params.get("toolCall") if isinstance(params, Mapping) else None
        tool = f" {asked['toolCallId']}" if isinstance(asked, Mapping) and "toolCallId" in asked else ""
        return f"{message['method']}{tool}"
    return f"the {'error' if 'error' in message else 'answer'} to request {message.get('id')}"


def _fields(old: Any, new: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """``(path, old, new)`` for every leaf that differs (``...`` stands for an absent value)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in dict.fromkeys([*old, *new]):
            yield from _fields(old.get(key, ...), new.get(key, ...), f"{path}.{key}" if path else str(key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from _fields(a, b, f"{path}[{index}]")
    elif old != new:
        yield path or "(the message)", old, new


def _marked(old: str, new: str) -> str:
    """One line: the stretch where two texts differ, marked, with a little context each side."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1

    def cut(text: str) -> str:
        return text if len(text) <= 2 * _CHANGE else f"{text[:_CHANGE]}…{text[-_CHANGE:]}"

    before = _json(old[max(0, start - _AROUND) : start])[1:-1]
    after = _json(old[len(old) - end : len(old) - end + _AROUND])[1:-1]
    removed, added = (
        _json(cut(old[start : len(old) - end]))[1:-1],
        _json(cut(new[start : len(new) - end]))[1:-1],
    )
    lead = "…" if start > _AROUND else ""
    tail = "…" if end > _AROUND else ""
    return f"at character {start + 1}: {lead}{before}[-{removed}-]{{+{added}+}}{after}{tail}"


def _field_line(path: str, old: Any, new: Any) -> str:
    if old is ...:
        return f"  {path}: added {_brief(new)}"
    if new is ...:
        return f"  {path}: removed (was {_brief(old)})"
    shown_old, shown_new = _json(old), _json(new)
    if isinstance(old, str) and isinstance(new, str) and max(len(shown_old), len(shown_new)) > _SHORT:
        return f"  {path} {_marked(old, new)}"
    return f"  {path}: {_brief(old)} → {_brief(new)}"


def _brief(value: Any) -> str:
    shown = _json(value)
    return shown if len(shown) <= 2 * _SHORT else f"{shown[:_SHORT]}… ({len(shown)} characters)"


def _changed(number: int, expected: str, actual: str) -> list[str]:
    old, new = _parsed(expected), _parsed(actual)
    out = [f"line {number}, {_label(new)}: changed"]
    fields = list(_fields(old, new))
    out += [_field_line(*field) for field in fields[:_MAX_FIELDS]]
    if len(fields) > _MAX_FIELDS:
        out.append(f"  … and {len(fields) - _MAX_FIELDS} more fields")
    return out


def _context_line(sign: str, line: str, other: str | None) -> str:
    """A line of the context, cut: around its first difference from ``other``, else its start."""
    if len(line) <= _LINE:
        return sign + line
    if other is not None:
        start = next(
            (i for i, (a, b) in enumerate(zip(line, other, strict=False)) if a != b),
            min(len(line), len(other)),
        )
        begin = max(0, start - _LINE // 2)
        end = begin + _LINE
        return f"{sign}{'…' if begin else ''}{line[begin:end]}{'…' if end < len(line) else ''}"
    return f"{sign}{line[:_LINE]}…"


def _context(expected: Sequence[str], actual: Sequence[str], name: str) -> list[str]:
    out = [f"--- {name}/expected.jsonl", f"+++ {name} (this run)"]
    matcher = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    for group in matcher.get_grouped_opcodes(1):
        first, last = group[0], group[-1]
        out.append(f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_context_line(" ", line, None) for line in expected[i1:i2]]
                continue
            olds, news = expected[i1:i2], actual[j1:j2]
            out += [
                _context_line("-", line, news[k] if k < len(news) else None) for k, line in enumerate(olds)
            ]
            out += [
                _context_line("+", line, olds[k] if k < len(olds) else None) for k, line in enumerate(news)
            ]
    return out


def golden_diff(expected: Sequence[str], actual: Sequence[str], name: str) -> str:
    """How this run's transcript differs from the golden: each changed message field by field,
    each added or removed one by what it is, then a short context (lines cut)."""
    changes: list[str] = []
    counts = {"changed": 0, "added": 0, "removed": 0}
    matcher = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1)
        for k in range(pairs):
            counts["changed"] += 1
            changes += _changed(j1 + k + 1, expected[i1 + k], actual[j1 + k])
        for index in range(i1 + pairs, i2):
            counts["removed"] += 1
            changes.append(f"line {index + 1} of the golden, {_label(_parsed(expected[index]))}: gone")
        for index in range(j1 + pairs, j2):
            counts["added"] += 1
            changes.append(f"line {index + 1}, {_label(_parsed(actual[index]))}: new")
    summary = ", ".join(
        f"{count} {'message' if count == 1 else 'messages'} {what}" for what, count in counts.items() if count
    )
    head = f"{summary} (the golden has {len(expected)} messages, this run {len(actual)})"
    return "\n".join([head, *changes, "", *_context(expected, actual, name)]) + "\n"

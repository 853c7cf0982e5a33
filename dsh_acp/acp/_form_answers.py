"""Whether a client's answer to a form fits the form the agent sent (``elicitation/create``).

The client is not trusted: an answer outside the choices, of the wrong type, with a key the form
does not have or without one it requires, or a value too long to show, is no answer at all, and
the model is told so in one line. The check reads only the flat forms the agent sends (primitive
properties), and never prints a value it refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_TEXT_CHARS", "form_problem"]

MAX_TEXT_CHARS: Final = 16_384
"""The longest text value an answer may carry (a card line shows it, the model reads it)."""

_TYPES: Final = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def _value_problem(name: str, spec: Mapping[str, Any], value: Any) -> str | None:
    kind = spec.get("type", "string")
    accepted = _TYPES.get(kind, ())
    is_bool = type(value) is bool
    if not isinstance(value, accepted) or (is_bool and kind != "boolean"):
        return f"{name!r} is {type(value).__name__}, not {kind}"
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return f"{name!r} is longer than {MAX_TEXT_CHARS} characters"
    choices = spec.get("enum")
    if isinstance(choices, list) and value not in choices:
        return f"{name!r} is not one of the choices"
    return None


def form_problem(schema: Mapping[str, Any], content: Any) -> str | None:
    """Why ``content`` does not fit ``schema``, in one short line, or ``None`` if it does."""
    if not isinstance(content, Mapping):
        return f"the answer is {type(content).__name__}, not an object"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    extra = [name for name in content if name not in properties]
    if extra:
        return f"{len(extra)} field(s) the question does not have"
    required = schema.get("required")
    missing = [n for n in (required if isinstance(required, list) else ()) if n not in content]
    if missing:
        return f"no value for {', '.join(repr(str(n)) for n in missing[:5])}"
    for name, value in content.items():
        problem = _value_problem(str(name), properties[name], value)
        if problem is not None:
            return problem
    return None

"""A Markdown catalog of tool schemas: what ``dsh-acp tools --markdown`` prints and
``docs/tools.md`` holds."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._definition import ToolSchema
from ._text import fenced

__all__ = ["tools_markdown"]

# Characters that would change the meaning of plain text inside Markdown (a glob's ** would
# turn bold, a | would split a table cell).
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def _escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _type(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(prop.get("items"), Mapping):
        return f"array of {_type(prop['items'])}"
    if kind is None:
        options = prop.get("anyOf") or prop.get("oneOf")
        if isinstance(options, list):
            return " or ".join(_type(o) for o in options if isinstance(o, Mapping))
        return "any"
    return str(kind)


def _rows(schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = set(schema.get("required") or ())
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            continue
        notes = [_escape(str(prop.get("description", "")))]
        if isinstance(prop.get("enum"), list):
            notes.append("One of: " + ", ".join(f"`{json.dumps(v)}`" for v in prop["enum"]) + ".")
        if "default" in prop:
            notes.append(f"Default: `{json.dumps(prop['default'])}`.")
        yes = "yes" if name in required else "no"
        yield f"| `{prefix}{name}` | {_type(prop)} | {yes} | {' '.join(n for n in notes if n)} |"
        if prop.get("type") == "object":
            yield from _rows(prop, f"{prefix}{name}.")


_INTRO = (
    "The tools the model is offered, as it sees them: each one's description, the rules it adds to "
    "the system prompt, its parameters and its exact JSON Schema (`dsh-acp tools --markdown` writes "
    "this page)."
)


def tools_markdown(schemas: Sequence[ToolSchema]) -> str:
    """A Markdown document describing ``schemas`` in the given order: for each tool its
    description, the rules it gives the system prompt, a table of its parameters and its exact
    JSON Schema. Pure and deterministic, so
    a test can keep a committed copy equal to it."""
    out = ["# Tools", "", _INTRO, ""]
    if not schemas:
        out += ["No tools are registered.", ""]
    for schema in schemas:
        out += [f"## `{schema.name}`", "", _escape(schema.description), ""]
        if schema.prompt_rules:  # said once in the system prompt, however many tools give them
            out += ["In the system prompt:", "", *(f"- {_escape(rule)}" for rule in schema.prompt_rules), ""]
        rows = list(_rows(schema.parameters))
        if rows:
            out += ["| Parameter | Type | Required | Description |", "| --- | --- | --- | --- |", *rows, ""]
        else:
            out += ["No parameters.", ""]
        parameters = json.dumps(schema.parameters, indent=2, ensure_ascii=False)
        out += ["<details><summary>JSON Schema</summary>", "", fenced(parameters, "json"), ""]
        out += ["</details>", ""]
    return "\n".join(out)

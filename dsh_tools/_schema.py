"""The parameter DSL (``SchemaSpec``): per-property specs that become JSON Schema for the model
and a validator for the model's (untrusted) arguments.

The validator agrees exactly with the generated JSON Schema (draft 2020-12): extra keys are
allowed, ``default`` is not applied, an ``object``/``array`` without ``properties``/``items`` is
only type-checked, and ``bool`` is neither a number nor an integer (Python's ``bool`` is an
``int``, JSON's is not). A property test pins the agreement against the ``jsonschema`` library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, Required, TypedDict

__all__ = [
    "SchemaProp",
    "SchemaSpec",
    "SchemaType",
    "check_schema_spec",
    "schema_spec_to_json_schema",
    "validate_args",
]

SchemaType = Literal["string", "number", "integer", "boolean", "object", "array"]


class SchemaProp(TypedDict, total=False):
    """One property of a ``SchemaSpec``."""

    type: Required[SchemaType]
    required: bool
    """Per-property flag (not JSON Schema's top-level ``required`` array)."""
    description: str
    enum: list[str]
    """Allowed values; only for ``type: "string"``."""
    default: Any
    """Shown to the model; never applied to the arguments."""
    properties: SchemaSpec
    """Nested properties of an ``object``."""
    items: SchemaProp
    """The item spec of an ``array``."""


SchemaSpec = Mapping[str, SchemaProp]

_ARTICLE = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
}
_PROP_KEYS = frozenset(SchemaProp.__annotations__)


def _is_type(value: Any, type_: str) -> bool:
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "object":
        return isinstance(value, dict)
    if type_ == "array":
        return isinstance(value, list)
    if type_ == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if type_ == "number":
        return isinstance(value, int | float)
    if type_ == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return False


def _enum_text(values: list[str]) -> str:
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def _check_value(prop: SchemaProp, value: Any, path: str, out: list[str]) -> None:
    type_ = prop["type"]
    if not _is_type(value, type_):
        out.append(f'"{path}" must be {_ARTICLE[type_]}')
        return
    enum = prop.get("enum")
    if enum is not None and value not in enum:
        out.append(f'"{path}" must be one of {_enum_text(enum)}')
        return
    if type_ == "object":
        nested = prop.get("properties")
        if nested is not None:
            _check_object(nested, value, path + ".", out)
    elif type_ == "array":
        items = prop.get("items")
        if items is not None:
            for index, item in enumerate(value):
                _check_value(items, item, f"{path}[{index}]", out)


# The exact Python types a JSON value of each scalar type is parsed as: a value of one of them is
# valid at once (no enum aside), without building its path for a message it will not need.
_PLAIN: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _check_object(spec: SchemaSpec, value: dict[str, Any], prefix: str, out: list[str]) -> None:
    plain = _PLAIN
    for key, prop in spec.items():
        if key in value:
            item = value[key]
            if type(item) in plain.get(prop["type"], ()) and "enum" not in prop:
                continue
            _check_value(prop, item, prefix + key, out)
        elif prop.get("required"):
            out.append(f'missing required property "{prefix}{key}"')


def validate_args(spec: SchemaSpec, args: Any) -> list[str]:
    """Check ``args`` against ``spec``; return every violation (empty when valid).

    Messages look like ``missing required property "a.b"``, ``"todos[0].status" must be a
    string`` and ``"mode" must be one of ["a","b"]``.
    """
    if not isinstance(args, dict):
        return ['"arguments" must be an object']
    out: list[str] = []
    _check_object(spec, args, "", out)
    return out


def _prop_to_json_schema(prop: SchemaProp) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": prop["type"]}
    if "description" in prop:
        schema["description"] = prop["description"]
    if "enum" in prop:
        schema["enum"] = list(prop["enum"])
    if "default" in prop:
        schema["default"] = prop["default"]
    if "properties" in prop:
        schema.update(schema_spec_to_json_schema(prop["properties"]))
    if "items" in prop:
        schema["items"] = _prop_to_json_schema(prop["items"])
    return schema


def schema_spec_to_json_schema(spec: SchemaSpec) -> dict[str, Any]:
    """Convert a ``SchemaSpec`` to an object JSON Schema (what the model is shown)."""
    required = [key for key, prop in spec.items() if prop.get("required")]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {key: _prop_to_json_schema(prop) for key, prop in spec.items()},
    }
    if required:
        schema["required"] = required
    return schema


def _check_prop(prop: Any, path: str, out: list[str]) -> None:
    if not isinstance(prop, Mapping):
        out.append(f'"{path}" must be a property spec (a dict)')
        return
    before = len(out)
    unknown = sorted(str(key) for key in prop if key not in _PROP_KEYS)
    if unknown:
        out.append(f'"{path}" has unknown keys {unknown}')
    type_ = prop.get("type")
    if type_ not in _ARTICLE:
        out.append(f'"{path}" has type {type_!r}; expected one of {sorted(_ARTICLE)}')
    if "required" in prop and not isinstance(prop["required"], bool):
        out.append(f'"{path}": "required" must be True or False')
    if "description" in prop and not isinstance(prop["description"], str):
        out.append(f'"{path}": "description" must be a string')
    _check_nested(prop, type_, path, out)
    if "default" in prop and len(out) == before:
        problems: list[str] = []
        _check_value(prop, prop["default"], path, problems)  # type: ignore[arg-type]
        out.extend(f"default: {problem}" for problem in problems)


def _check_nested(prop: Mapping[str, Any], type_: Any, path: str, out: list[str]) -> None:
    """The keys that belong to one type: a string's ``enum``, an object's ``properties``, an
    array's ``items``."""
    if "enum" in prop:
        enum = prop["enum"]
        if type_ != "string":
            out.append(f'"{path}": "enum" is only allowed on strings')
        elif not isinstance(enum, list | tuple) or not enum or not all(isinstance(v, str) for v in enum):
            out.append(f'"{path}": "enum" must be a non-empty list of strings')
    if "properties" in prop:
        if type_ != "object":
            out.append(f'"{path}": "properties" is only allowed on objects')
        else:
            _check_spec(prop["properties"], path + ".", out)
    if "items" in prop:
        if type_ != "array":
            out.append(f'"{path}": "items" is only allowed on arrays')
        else:
            _check_prop(prop["items"], path + "[]", out)


def _check_spec(spec: Any, prefix: str, out: list[str]) -> None:
    if not isinstance(spec, Mapping):
        out.append(f'"{prefix.rstrip(".") or "parameters"}" must be a dict of property specs')
        return
    for key, prop in spec.items():
        if not isinstance(key, str) or not key:
            out.append(f"property names must be non-empty strings, not {key!r}")
            continue
        _check_prop(prop, prefix + key, out)


def check_schema_spec(spec: Any) -> list[str]:
    """Return every problem of a ``SchemaSpec`` (empty when it is well formed)."""
    out: list[str] = []
    _check_spec(spec, "", out)
    return out

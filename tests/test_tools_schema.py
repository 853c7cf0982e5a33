"""The SchemaSpec DSL: JSON Schema conversion, argument validation, spec checking."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tools import SchemaSpec, check_schema_spec, schema_spec_to_json_schema, validate_args

TODO_SPEC: SchemaSpec = {
    "todos": {
        "type": "array",
        "required": True,
        "items": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "required": True},
                "status": {"type": "string", "enum": ["pending", "done"], "required": True},
            },
        },
    },
    "count": {"type": "integer"},
    "ratio": {"type": "number"},
    "flag": {"type": "boolean"},
    "opts": {"type": "object", "properties": {"deep": {"type": "object", "required": True}}},
    "any_list": {"type": "array"},
    "any_obj": {"type": "object"},
}


def test_json_schema_shape() -> None:
    spec: SchemaSpec = {
        "path": {"type": "string", "required": True, "description": "Absolute path"},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"x": {"type": "integer", "required": True}}},
        "blob": {"type": "object"},
    }
    assert schema_spec_to_json_schema(spec) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path"},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
            "blob": {"type": "object"},
        },
        "required": ["path"],
    }


def test_no_required_key_when_nothing_is_required() -> None:
    assert schema_spec_to_json_schema({"a": {"type": "string"}}) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (None, ['"arguments" must be an object']),
        ([], ['"arguments" must be an object']),
        ("{}", ['"arguments" must be an object']),
        ({}, ['missing required property "todos"']),
        ({"todos": "x"}, ['"todos" must be an array']),
        (
            {"todos": [{"content": "a", "status": "later"}]},
            ['"todos[0].status" must be one of ["pending","done"]'],
        ),
        (
            {"todos": [{"status": "done"}, 3]},
            ['missing required property "todos[0].content"', '"todos[1]" must be an object'],
        ),
        ({"todos": [], "count": 1.5}, ['"count" must be an integer']),
        ({"todos": [], "count": True}, ['"count" must be an integer']),
        ({"todos": [], "ratio": False}, ['"ratio" must be a number']),
        ({"todos": [], "ratio": "1"}, ['"ratio" must be a number']),
        ({"todos": [], "flag": 1}, ['"flag" must be a boolean']),
        ({"todos": [], "opts": {}}, ['missing required property "opts.deep"']),
        ({"todos": [], "opts": {"deep": []}}, ['"opts.deep" must be an object']),
        ({"todos": [], "any_list": {}}, ['"any_list" must be an array']),
        ({"todos": [], "any_obj": []}, ['"any_obj" must be an object']),
        (
            {"todos": [{"content": 1, "status": 2}]},
            ['"todos[0].content" must be a string', '"todos[0].status" must be a string'],
        ),
    ],
)
def test_violation_messages(args: Any, expected: list[str]) -> None:
    assert validate_args(TODO_SPEC, args) == expected


@pytest.mark.parametrize(
    "args",
    [
        {"todos": []},
        {"todos": [], "count": 2, "ratio": 2, "extra": {"anything": True}},
        {"todos": [], "count": 2.0, "ratio": 0.5},
        {"todos": [{"content": "a", "status": "done", "more": 1}]},
        {"todos": [], "any_list": [1, "x", None], "any_obj": {"k": [1]}},
    ],
)
def test_valid_arguments(args: Any) -> None:
    assert validate_args(TODO_SPEC, args) == []


def test_defaults_are_not_applied() -> None:
    spec: SchemaSpec = {"a": {"type": "string", "default": "x"}}
    args: dict[str, Any] = {}
    assert validate_args(spec, args) == []
    assert args == {}


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        ({"a": {"type": "str"}}, ["\"a\" has type 'str'; expected one of"]),
        ({"a": {"type": "string", "required": "yes"}}, ['"a": "required" must be True or False']),
        ({"a": {"type": "integer", "enum": ["x"]}}, ['"a": "enum" is only allowed on strings']),
        ({"a": {"type": "string", "enum": []}}, ['"a": "enum" must be a non-empty list of strings']),
        ({"a": {"type": "string", "properties": {}}}, ['"a": "properties" is only allowed on objects']),
        ({"a": {"type": "object", "items": {"type": "string"}}}, ['"a": "items" is only allowed on arrays']),
        ({"a": {"type": "array", "items": {"type": "nope"}}}, ["\"a[]\" has type 'nope'"]),
        ({"a": {"type": "object", "properties": {"b": 3}}}, ['"a.b" must be a property spec']),
        ({"a": {"type": "string", "colour": "red"}}, ["\"a\" has unknown keys ['colour']"]),
        ({"a": {"type": "integer", "default": "x"}}, ['default: "a" must be an integer']),
        ({"": {"type": "string"}}, ["property names must be non-empty strings"]),
        ([], ['"parameters" must be a dict of property specs']),
    ],
)
def test_check_schema_spec(spec: Any, problems: list[str]) -> None:
    found = check_schema_spec(spec)
    assert len(found) == len(problems), found
    for got, want in zip(found, problems, strict=True):
        assert got.startswith(want), (got, want)


def test_check_schema_spec_reports_every_problem() -> None:
    spec = {"a": {"type": "x"}, "b": {"type": "string", "enum": [1]}, "c": {"type": "array", "items": 1}}
    assert len(check_schema_spec(spec)) == 3


def test_well_formed_spec_has_no_problems() -> None:
    assert check_schema_spec(TODO_SPEC) == []


# -- the property: validate_args agrees exactly with jsonschema on the generated schema ------

_WORDS = st.sampled_from(["a", "b", "c", "status", "x y"])
_SCALAR_TYPES = st.sampled_from(["string", "number", "integer", "boolean"])


def _props(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    scalar = st.builds(
        lambda type_, required: {"type": type_, **({"required": True} if required else {})},
        _SCALAR_TYPES,
        st.booleans(),
    )
    enum = st.builds(
        lambda values, required: {
            "type": "string",
            "enum": values,
            **({"required": True} if required else {}),
        },
        st.lists(_WORDS, min_size=1, max_size=3, unique=True),
        st.booleans(),
    )
    leaf = scalar | enum | st.just({"type": "object"}) | st.just({"type": "array"})
    if depth == 0:
        return leaf
    nested = _props(depth - 1)
    obj = st.builds(
        lambda props, required: {
            "type": "object",
            "properties": props,
            **({"required": True} if required else {}),
        },
        st.dictionaries(_WORDS, nested, max_size=3),
        st.booleans(),
    )
    arr = st.builds(lambda items: {"type": "array", "items": items}, nested)
    return leaf | obj | arr


SPECS = st.dictionaries(_WORDS, _props(2), max_size=4)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-3, max_value=3)
    | _WORDS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_WORDS, children, max_size=4),
    max_leaves=12,
)


@st.composite
def spec_and_value(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    spec = draw(SPECS)
    # Half the time build a value shaped like the spec so that valid cases are common too.
    if draw(st.booleans()):
        return spec, draw(JSON_VALUES)
    return spec, draw(_shaped(spec))


def _shaped(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    def for_prop(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
        type_ = prop["type"]
        if "enum" in prop:
            return st.sampled_from(prop["enum"]) | _WORDS
        if type_ == "string":
            return _WORDS
        if type_ == "integer":
            return st.integers(-2, 2) | st.just(1.0)
        if type_ == "number":
            return st.floats(-2, 2) | st.integers(-2, 2)
        if type_ == "boolean":
            return st.booleans()
        if type_ == "object":
            return _shaped(prop.get("properties", {})) if "properties" in prop else st.just({})
        items = prop.get("items")
        return st.lists(for_prop(items) if items else JSON_VALUES, max_size=2)

    if not spec:
        return st.just({})
    return st.fixed_dictionaries({}, optional={k: for_prop(p) for k, p in spec.items()}) | JSON_VALUES


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(spec_and_value())
def test_validate_args_agrees_with_jsonschema(case: tuple[dict[str, Any], Any]) -> None:
    spec, value = case
    assert check_schema_spec(spec) == []
    schema = schema_spec_to_json_schema(spec)
    validator = jsonschema.Draft202012Validator(schema)
    accepted = validator.is_valid(value)
    violations = validate_args(spec, value)
    assert (violations == []) == accepted, (schema, value, violations)

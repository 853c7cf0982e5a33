"""The model's tool calls checked as a batch: unique ids, arguments that can be shown and run."""

from __future__ import annotations

from dsh_acp import ToolCallRequest
from dsh_acp.loop._call_arguments import (
    MAX_ARGUMENT_BYTES,
    MAX_ARGUMENT_DEPTH,
    parse_arguments,
    with_unique_id,
)


def test_ids_are_made_unique_within_a_turn() -> None:
    taken: set[str] = set()
    ids = [with_unique_id(ToolCallRequest(i, "look", "{}"), taken).id for i in ["a", "a", "a-2", "b", "a"]]
    assert ids == ["a", "a-2", "a-2-2", "b", "a-3"]
    assert len(set(ids)) == len(ids)


def test_arguments_depth_limit_is_exact() -> None:
    fits = "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH
    arguments, problem = parse_arguments(fits)
    assert problem is None
    assert isinstance(arguments, list)
    deeper = "[" * (MAX_ARGUMENT_DEPTH + 1) + "]" * (MAX_ARGUMENT_DEPTH + 1)
    shown, problem = parse_arguments(deeper)
    assert shown == deeper  # the raw text, which any encoder can carry
    assert problem == f"invalid arguments: nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    # Past the JSON parser's own limit the reason is the same.
    assert parse_arguments('{"a":' + "[" * 5000 + "]" * 5000 + "}")[1] == problem


def test_arguments_size_limit() -> None:
    big = '{"text": "' + "é" * (MAX_ARGUMENT_BYTES // 2) + '"}'
    shown, problem = parse_arguments(big)
    assert problem is not None
    size = len(big.encode())
    assert problem.startswith(f"invalid arguments: {size} bytes, more than the {MAX_ARGUMENT_BYTES}")
    assert isinstance(shown, str)
    assert len(shown.encode()) < 4096
    assert parse_arguments('{"text": "' + "x" * 1000 + '"}') == ({"text": "x" * 1000}, None)


def test_other_arguments_are_parsed_as_before() -> None:
    assert parse_arguments("") == ({}, None)
    assert parse_arguments('{"path": "a"}') == ({"path": "a"}, None)
    assert parse_arguments('{"path": "a",') == ('{"path": "a",', None)  # the tool says what is wrong

"""``brief``: log-safe renderings of peer values (bounded, never recursing, never raising)."""

from __future__ import annotations

import orjson

from dsh_acp._safe_text import BRIEF_LIMIT, brief


def test_small_values_read_like_repr() -> None:
    assert brief({"code": 1, "message": "x", "data": [1, None, True, 1.5]}) == (
        "{'code': 1, 'message': 'x', 'data': [1, None, True, 1.5]}"
    )
    assert brief("a\nb") == "'a\\nb'"  # one line
    assert brief([]) == "[]"
    assert brief({}) == "{}"


def test_deep_nesting_is_cut_without_recursion() -> None:
    deep = orjson.loads(b"[" * 1000 + b"]" * 1000)
    assert brief(deep) == "[" * 6 + "[…]" + "]" * 6
    objects = orjson.loads(b'{"a":' * 1000 + b"1" + b"}" * 1000)
    assert brief({"data": objects}).startswith("{'data': {'a': {'a'")


def test_huge_values_are_cut_to_the_budget() -> None:
    text = brief("i" * (4 << 20))
    assert len(text) < BRIEF_LIMIT + 40
    assert text.endswith("…(4194304 chars)")
    assert len(brief(list(range(1_000_000)))) <= BRIEF_LIMIT + 2
    assert len(brief({str(i): "v" * 1000 for i in range(10_000)})) <= BRIEF_LIMIT + 200
    assert brief(10**5000) == "<int of 16610 bits>"


def test_an_object_whose_repr_fails_is_named() -> None:
    class Loop:
        def __repr__(self) -> str:
            return repr(self)

    assert brief(Loop()) == "<Loop: repr failed (RecursionError)>"

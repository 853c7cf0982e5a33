"""The stream assembler of the OpenAI-compatible model: its shortcut for a plain text or
reasoning delta (a model's every token) against its general walk, on random chunks."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_acp import ModelError, ReasoningDelta, TextDelta
from dsh_acp.models._openai_response import Assembler

_ANY = st.one_of(
    st.none(), st.booleans(), st.integers(-1, 2), st.sampled_from(["", "x", "stop", "tool_calls"])
)
_USAGE = st.fixed_dictionaries({"prompt_tokens": _ANY, "completion_tokens": _ANY})
_TEXT = st.one_of(_ANY, st.text(max_size=5))
_TOOL_CALL = st.fixed_dictionaries(
    {"index": st.integers(0, 1), "id": st.just("call_1")},
    optional={"function": st.fixed_dictionaries({}, optional={"name": _TEXT, "arguments": _TEXT})},
)
_DELTA = st.fixed_dictionaries(
    {},
    optional={
        "role": st.just("assistant"),
        "content": _TEXT,
        "reasoning_content": _TEXT,
        "reasoning": _TEXT,
        "tool_calls": st.one_of(_ANY, st.lists(_TOOL_CALL, max_size=2)),
    },
)
_CHOICE = st.fixed_dictionaries(
    {},
    optional={"index": _ANY, "delta": st.one_of(_DELTA, _ANY), "finish_reason": _ANY, "logprobs": st.none()},
)
_RANDOM_CHUNK = st.fixed_dictionaries(
    {},
    optional={
        "id": st.just("chatcmpl-1"),
        "choices": st.one_of(st.lists(st.one_of(_CHOICE, _ANY), max_size=2), _ANY),
        "usage": st.one_of(_ANY, _USAGE),
        "error": st.one_of(_ANY, st.just({"message": "overloaded"})),
    },
)


@st.composite
def _near_token(draw: st.DrawFn) -> dict[str, Any]:
    """A token's chunk (text or reasoning, as OpenAI or DeepSeek send it), mostly with one thing
    more that may make it another kind of chunk: where a shortcut would go wrong."""
    text = draw(st.booleans())
    delta: dict[str, Any] = {"content": "Hi"} if text else {"content": None, "reasoning_content": "hm"}
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    chunk: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}
    extra = draw(st.integers(0, 7))
    if extra == 1:
        chunk["usage"] = draw(st.one_of(_ANY, _USAGE, st.just({"prompt_tokens": 5, "completion_tokens": 2})))
    elif extra == 2:
        chunk["error"] = draw(st.one_of(_ANY, st.just({"message": "overloaded"})))
    elif extra == 3:
        choice["finish_reason"] = draw(_ANY)
    elif extra == 4:
        choice["index"] = draw(_ANY)
    elif extra == 5:
        delta[draw(st.sampled_from(["content", "reasoning_content", "reasoning", "role"]))] = draw(_TEXT)
    elif extra == 6:
        delta["tool_calls"] = draw(st.one_of(_ANY, st.lists(_TOOL_CALL, max_size=2)))
    elif extra == 7:
        second = st.one_of(st.just({**choice, "delta": {"content": "!"}}), _CHOICE, _ANY)
        chunk["choices"] = [choice, draw(second)]
    return chunk


_CHUNK = st.one_of(_near_token(), _near_token(), _near_token(), _RANDOM_CHUNK, _ANY)


def _run(chunks: list[Any], general: bool) -> tuple[list[Any], Any]:
    assembler = Assembler(1000, "the server")
    feed = assembler.feed_any if general else assembler.feed
    events: list[Any] = []
    for chunk in chunks:
        try:
            events.append(feed(chunk))
        except ModelError as error:
            events.append(str(error))
            break
    state = (assembler.finish, assembler.usage, assembler.calls)
    return events, state


@settings(max_examples=1000)
@given(chunks=st.lists(_CHUNK, min_size=1, max_size=6))
def test_the_token_shortcut_gives_what_the_general_walk_gives(chunks: list[Any]) -> None:
    assert _run(chunks, general=False) == _run(chunks, general=True)


def test_a_token_chunk_is_one_event() -> None:
    assembler = Assembler(None, "the server")
    openai = {"id": "c", "object": "chat.completion.chunk", "usage": None}
    choice = {"index": 0, "delta": {"content": "Hi"}, "logprobs": None, "finish_reason": None}
    assert assembler.feed({**openai, "choices": [choice]}) == [TextDelta("Hi")]
    deepseek = {"index": 0, "delta": {"content": None, "reasoning_content": "hmm"}, "finish_reason": None}
    assert assembler.feed({"choices": [deepseek]}) == [ReasoningDelta("hmm")]
    assert assembler.feed({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}) == []

"""The context window a self-hosted server reports: asked once per base URL and model, learned
from a context-size error, overridden by the config file; the usage meter uses it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chunk, llama_error, stream_reply

from dsh_acp import ContextOverflow, ModelRequest, Usage, UserMessage
from dsh_acp.models._openai import OpenAIModel
from dsh_acp.models._openai_server import ollama_window
from dsh_acp.models._settings import ModelSettings, is_self_hosted
from dsh_tools import TextBlock

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[UserMessage((TextBlock(text="hello"),))], tools=[])


def settings_for(server: FakeOpenAI, **changes: Any) -> ModelSettings:
    return replace(ModelSettings(model="fake", base_url=server.base_url, stall_timeout=5), **changes)


def answered(usage: tuple[int, int] = (100, 5)) -> Any:
    return stream_reply(chunk("hi"), chunk(finish="stop"), chunk(choices=False, usage=usage))


async def usage_of(model: OpenAIModel) -> Usage | None:
    events = [event async for event in model.stream(REQUEST)]
    return next((event for event in events if isinstance(event, Usage)), None)


@pytest.mark.parametrize("style", ["llama.cpp", "vllm"])
async def test_the_window_comes_from_v1_models(style: Any) -> None:
    async with FakeOpenAI([answered(), answered()], n_ctx=1024, models_style=style) as server:
        model = OpenAIModel(settings_for(server))
        other = OpenAIModel(settings_for(server))  # another session, same server and model
        try:
            assert await usage_of(model) == Usage(100, 5, 1024)
            assert await usage_of(other) == Usage(100, 5, 1024)
        finally:
            await model.aclose()
            await other.aclose()
    assert len(server.model_requests) == 1  # asked once for the process
    assert model.context_window == 1024


async def test_the_config_file_wins_over_the_server() -> None:
    async with FakeOpenAI([answered()], n_ctx=1024) as server:
        model = OpenAIModel(settings_for(server, context_window=2048, context_window_configured=True))
        try:
            assert await usage_of(model) == Usage(100, 5, 2048)
        finally:
            await model.aclose()


async def test_the_server_wins_over_the_table_of_known_models() -> None:
    async with FakeOpenAI([answered()], n_ctx=1024) as server:
        model = OpenAIModel(settings_for(server, context_window=128_000))
        try:
            assert await usage_of(model) == Usage(100, 5, 1024)
        finally:
            await model.aclose()


async def test_a_server_without_models_still_serves() -> None:
    async with FakeOpenAI([answered()], models_style="none") as server:
        model = OpenAIModel(settings_for(server))
        try:
            assert await usage_of(model) == Usage(100, 5, None)
        finally:
            await model.aclose()


async def test_a_context_size_error_teaches_the_window() -> None:
    message = "request (1045 tokens) exceeds the available context size (1000 tokens), try increasing it"
    refusal = llama_error(400, message, "exceed_context_size_error", n_prompt_tokens=1045, n_ctx=1000)
    async with FakeOpenAI([refusal, answered()], models_style="none") as server:
        model = OpenAIModel(settings_for(server))
        try:
            with pytest.raises(ContextOverflow) as info:
                await usage_of(model)
            assert (info.value.context_window, info.value.prompt_tokens) == (1000, 1045)
            assert str(info.value).endswith(message + ")")
            assert await usage_of(model) == Usage(100, 5, 1000)
        finally:
            await model.aclose()


async def test_the_strict_fake_refuses_a_prompt_too_large_for_its_window() -> None:
    async with FakeOpenAI([answered()], n_ctx=64) as server:
        model = OpenAIModel(settings_for(server))
        big = ModelRequest(messages=[UserMessage((TextBlock(text="word " * 200),))], tools=[])
        try:
            with pytest.raises(ContextOverflow) as info:
                _ = [event async for event in model.stream(big)]
        finally:
            await model.aclose()
    assert info.value.context_window == 64
    assert "exceeds the available context size (64 tokens)" in str(info.value)


def test_which_servers_are_asked() -> None:
    assert is_self_hosted("http://127.0.0.1:8080/v1")
    assert is_self_hosted("http://localhost:11434/v1")
    assert is_self_hosted("http://192.168.1.20:8000/v1")
    assert is_self_hosted("http://llama:8080/v1")
    assert not is_self_hosted("https://api.openai.com/v1")
    assert not is_self_hosted("https://openrouter.ai/api/v1")


@pytest.mark.parametrize("from_parameters", [True, False], ids=["num_ctx", "model_info"])
async def test_ollama_tells_the_window_in_api_show(from_parameters: bool) -> None:
    async with FakeOpenAI(
        [answered(), answered()], n_ctx=4096, models_style="ollama", ollama_num_ctx=from_parameters
    ) as server:
        model = OpenAIModel(settings_for(server))
        other = OpenAIModel(settings_for(server))
        try:
            assert await usage_of(model) == Usage(100, 5, 4096)
            assert await usage_of(other) == Usage(100, 5, 4096)
        finally:
            await model.aclose()
            await other.aclose()
    assert [(r.method, r.path) for r in server.model_requests] == [
        ("GET", "/v1/models"),
        ("POST", "/api/show"),
    ]
    assert server.model_requests[1].json == {"model": "fake"}
    assert "return_progress" not in server.chat_requests[0].json  # not llama.cpp


async def test_a_server_that_is_not_ollama_is_not_asked_for_api_show() -> None:
    async with FakeOpenAI([answered()], models_style="vllm") as server:  # no window in its list
        model = OpenAIModel(settings_for(server))
        try:
            assert await usage_of(model) == Usage(100, 5, None)
        finally:
            await model.aclose()
    assert [(r.method, r.path) for r in server.model_requests] == [("GET", "/v1/models")]


def test_the_window_in_an_ollama_answer() -> None:
    assert ollama_window({"parameters": 'num_ctx    8192\nstop "x"', "model_info": {}}) == 8192
    info = {"general.architecture": "qwen2", "qwen2.context_length": 32768, "llama.context_length": 1}
    assert ollama_window({"parameters": "temperature 0.7", "model_info": info}) == 32768
    for broken in (
        None,
        [],
        {"model_info": {"general.architecture": "x", "x.context_length": "big"}},
        {"parameters": "num_ctx lots", "model_info": None},
        {"model_info": {"general.architecture": 3}},
    ):
        assert ollama_window(broken) is None

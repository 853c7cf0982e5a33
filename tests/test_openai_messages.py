"""Pure pieces of the OpenAI-compatible model: the conversation mapping and the system prompt
(the SSE decoder: test_openai_sse.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from dsh_acp import (
    AssistantMessage,
    ContextMessage,
    Message,
    ModelRequest,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from dsh_acp.loop._prompt import system_prompt
from dsh_acp.models._openai_request import chat_messages, chat_request
from dsh_acp.models._settings import ModelSettings
from dsh_tools import ToolDefinitionError, ToolRegistry, ToolSchema, define_tool
from dsh_tools._content import (
    BlobResource,
    EmbeddedResourceBlock,
    ImageBlock,
    ResourceLinkBlock,
    TextBlock,
    TextResource,
)

# -- the conversation -------------------------------------------------------------------------


def test_user_blocks_become_parts() -> None:
    message = UserMessage(
        (
            TextBlock(text="look at"),
            ResourceLinkBlock(uri="file:///work/a%20b.py", name="a b.py"),
            EmbeddedResourceBlock(resource=TextResource(uri="file:///work/c.py", text="x = 1")),
            ImageBlock(data="AAAA", mime_type="image/png"),
            EmbeddedResourceBlock(
                resource=BlobResource(uri="file:///work/d.png", blob="BBBB", mime_type="image/png")
            ),
            EmbeddedResourceBlock(resource=BlobResource(uri="file:///work/e.bin", blob="CCCC")),
        )
    )
    [mapped] = chat_messages([message], accepts_images=True)
    assert mapped == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at"},
            {"type": "text", "text": "[@a b.py](file:///work/a%20b.py) (file: /work/a b.py)"},
            {"type": "text", "text": '<resource uri="file:///work/c.py">\nx = 1\n</resource>'},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBBB"}},
            {
                "type": "text",
                "text": "[binary resource file:///work/e.bin (application/octet-stream) not shown]",
            },
        ],
    }


def test_text_only_user_content_is_one_string() -> None:
    message = UserMessage((TextBlock(text="a"), ResourceLinkBlock(uri="https://x.test/doc", name="doc")))
    assert chat_messages([message]) == [{"role": "user", "content": "a\n\n[@doc](https://x.test/doc)"}]


def test_images_are_described_when_the_model_takes_none() -> None:
    message = UserMessage((TextBlock(text="see"), ImageBlock(data="AAAA", mime_type="image/png")))
    [mapped] = chat_messages([message], accepts_images=False)
    assert mapped["content"] == "see\n\n[an image was attached, but this model does not take images]"


def test_tool_result_images_follow_the_step_in_one_user_message() -> None:
    call_a = ToolCallRequest("a", "shot", "{}")
    call_b = ToolCallRequest("b", "read", "{}")
    messages: list[Message] = [
        AssistantMessage(tool_calls=(call_a, call_b)),
        ToolResultMessage(
            "a", "shot", (TextBlock(text="took it"), ImageBlock(data="AAAA", mime_type="image/png"))
        ),
        ToolResultMessage("b", "read", (TextBlock(text="line 1"), TextBlock(text="line 2")), is_error=True),
        ContextMessage("note"),
    ]
    mapped: list[dict[str, Any]] = chat_messages(messages, system="sys", accepts_images=True)
    assert [m["role"] for m in mapped] == ["system", "assistant", "tool", "tool", "user", "user"]
    assert mapped[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}},
        ],
    }
    assert mapped[2] == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "took it\n[image: shown in the next message]",
    }
    assert mapped[3] == {"role": "tool", "tool_call_id": "b", "content": "line 1\nline 2"}
    assert mapped[4]["content"] == [
        {"type": "text", "text": "Images from tool call a:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    assert mapped[5] == {"role": "user", "content": "<context>\nnote\n</context>"}


def test_empty_assistant_message_still_has_content() -> None:
    assert chat_messages([AssistantMessage()]) == [{"role": "assistant", "content": ""}]


def test_reasoning_is_echoed_only_when_asked() -> None:
    message = AssistantMessage(text="hi", reasoning="hmm")
    assert chat_messages([message]) == [{"role": "assistant", "content": "hi"}]
    assert chat_messages([message], send_reasoning=True) == [
        {"role": "assistant", "content": "hi", "reasoning_content": "hmm"}
    ]
    # After tool calls DeepSeek wants the field even when there was no reasoning.
    calls = AssistantMessage(tool_calls=(ToolCallRequest("c", "ls", "{}"),))
    assert chat_messages([calls], send_reasoning=True)[0]["reasoning_content"] == ""
    assert "reasoning_content" not in chat_messages([AssistantMessage(text="x")], send_reasoning=True)[0]


# -- the system prompt ------------------------------------------------------------------------

TOOLS = [
    ToolSchema(name, f"the {name} tool", {"type": "object"}) for name in ("read", "edit", "bash", "grep")
]


def _reference_schemas() -> list[ToolSchema]:
    from reference_tools import default_tools  # the test reaches past dsh_acp on purpose

    return [definition.schema for definition in default_tools()]


def test_system_prompt_states_cwd_and_the_reference_tools_conventions() -> None:
    prompt = system_prompt("/home/me/project", _reference_schemas())
    assert "Working directory: /home/me/project; relative or omitted paths mean it." in prompt
    assert prompt.count("Read a file before changing it") == 1  # read, write, edit give it
    assert prompt.count("Prefer the file tools over shell commands") == 1
    assert prompt.count("File searches skip .git") == 1  # glob, grep, ls give it
    assert "never start interactive programs" in prompt
    assert "run the tests" in prompt
    assert "Be brief" in prompt


def test_system_prompt_rules_come_from_the_tools() -> None:
    # Tool names mean nothing to the prompt: only the rules a tool gives.
    named_like_ours = system_prompt("/p", TOOLS)
    assert "Read a file before" not in named_like_ours
    assert "interactive" not in named_like_ours
    assert "run the tests" in named_like_ours  # the agent's own rule, for any tools
    ruled = [
        ToolSchema("deploy", "d", {"type": "object"}, ("Deploy only from main.", "Say which host.")),
        ToolSchema("rollback", "r", {"type": "object"}, ("Say which host.",)),
    ]
    rules = system_prompt("/p", ruled).split("# Rules\n")[1].splitlines()
    assert rules[:3] == [
        "- Deploy only from main.",
        "- Say which host.",
        "- After changing code, run the tests or checks and report the result.",
    ]


def test_prompt_rules_are_checked_when_a_tool_is_defined() -> None:
    async def run(args: dict[str, object], execution: object) -> str:
        return ""

    for bad in ("one string, not a sequence", ["two\nlines"], [""]):
        with pytest.raises(ToolDefinitionError, match="prompt_rules"):
            define_tool(name="t", description="d", parameters={}, execute=run, prompt_rules=bad)  # type: ignore[arg-type]
    tool = define_tool(name="t", description="d", parameters={}, execute=run, prompt_rules=["Be careful."])
    assert tool.schema.prompt_rules == ("Be careful.",)


def test_system_prompt_is_deterministic_and_takes_extra() -> None:
    first = system_prompt("/p", TOOLS, extra="Use tabs.")
    assert first == system_prompt("/p", TOOLS, extra="Use tabs.")
    assert first.endswith("\n\nUse tabs.\n")
    assert "# Project instructions" in first
    assert "20" not in first  # no dates, no years


def test_system_prompt_without_tools() -> None:
    prompt = system_prompt("/p", [])
    assert "Read a file" not in prompt
    assert "interactive" not in prompt


def test_first_request_stays_lean() -> None:
    # The system prompt and the tools' schemas are sent with every request; a small local model's
    # context must keep room for the conversation. bench/bench_first_request.py measures the real
    # request against its target of 1,200 tokens; this pins the largest tool set the command line
    # offers (the sandbox's widen, and task) a little below it, so the bench keeps a margin.
    from dsh_acp.loop._task_tool import task_tool
    from reference_tools import default_tools  # the test reaches past dsh_acp on purpose

    registry = ToolRegistry()
    for definition in [*default_tools(sandbox=True), task_tool()]:
        registry.register(definition)
    schemas = registry.schemas()
    request = ModelRequest(messages=[], tools=schemas, system=system_prompt("/home/me/project", schemas))
    body = chat_request(ModelSettings(model="m", base_url="http://127.0.0.1:1/v1"), request)
    characters = len(body["messages"][0]["content"]) + sum(len(orjson.dumps(tool)) for tool in body["tools"])
    assert characters <= 4 * 1175, characters

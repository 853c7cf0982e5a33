"""Request bodies of ``/chat/completions``: our conversation in the chat-completions shape, and
the encoder that builds each body in time linear in what changed since the last one."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import orjson

from ._history import conversation, conversation_from
from ._model import (
    AssistantMessage,
    ContextMessage,
    Message,
    ModelRequest,
    ToolResultMessage,
    UserMessage,
)
from ._settings import ModelSettings

if TYPE_CHECKING:
    from dsh_tools import ContentBlock, ToolSchema

__all__ = ["RequestEncoder", "chat_messages", "chat_request"]


def chat_request(settings: ModelSettings, request: ModelRequest, *, progress: bool = False) -> dict[str, Any]:
    """The JSON body of one ``/chat/completions`` call: every request's conversation passes
    through ``conversation`` here, so what is sent is valid whatever the history holds."""
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": chat_messages(
            conversation(request.messages),
            system=request.system,
            accepts_images=settings.accepts_images,
            send_reasoning=settings.send_reasoning,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [_tool(schema) for schema in request.tools]
    if request.reasoning_effort and request.reasoning_effort in settings.reasoning_efforts:
        body["reasoning_effort"] = request.reasoning_effort
    if progress:
        body["return_progress"] = True  # llama.cpp only: other servers may refuse unknown fields
    return body


class RequestEncoder:
    """Builds request bodies in time linear in what changed since the last one.

    A conversation only grows between compactions, so the messages before the newest
    checkpoint of ``conversation_from`` (a point after which nothing changes what came before)
    keep their encoding; a request re-encodes only the messages after it. The history is
    compared by identity, so a compaction (or any other rewrite) simply starts over. The tool
    schemas' encoding is kept while the same schema objects are sent.
    """

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._inputs: list[Message] = []
        self._parts: list[bytes] = []
        self._previous: Message | None = None
        self._schemas: list[ToolSchema] = []  # kept alive: compared by identity
        self._tools = b""

    def encode(self, request: ModelRequest, *, progress: bool = False) -> bytes:
        """The JSON body of ``chat_request`` for ``request``, as bytes."""
        settings = self.settings
        head: list[bytes] = []
        if request.system:
            head.append(orjson.dumps({"role": "system", "content": request.system}))
        rest: dict[str, Any] = {
            "model": settings.model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if progress:
            rest["return_progress"] = True
        if request.reasoning_effort and request.reasoning_effort in settings.reasoning_efforts:
            rest["reasoning_effort"] = request.reasoning_effort
        messages = b",".join(head + self._messages(request.messages))
        body = b'{"messages":[' + messages + b"]," + orjson.dumps(rest)[1:-1]
        if request.tools:
            body += b',"tools":' + self._tools_json(request.tools)
        return body + b"}"

    def _messages(self, messages: Sequence[Message]) -> list[bytes]:
        """Each message encoded: those up to the last checkpoint as they were last time when the
        conversation still starts with the same objects, the rest now."""
        point = len(self._inputs)
        if point and len(messages) >= point and all(map(operator.is_, messages, self._inputs)):
            kept, previous = self._parts, self._previous
        else:
            point, kept, previous = 0, [], None
        tail, checkpoint = conversation_from(messages, point, previous)
        settings = self.settings
        encoded = [
            orjson.dumps(entry)
            for entry in chat_messages(
                tail, accepts_images=settings.accepts_images, send_reasoning=settings.send_reasoning
            )
        ]
        parts = kept + encoded if kept else encoded
        if checkpoint is not None:
            index, count = checkpoint
            final = len(kept) + count
            self._inputs = list(messages[:index])
            self._parts = parts[:final]
            self._previous = tail[count - 1] if count else previous
        return parts

    def _tools_json(self, tools: Sequence[ToolSchema]) -> bytes:
        """The tools' JSON, encoded again only when the schema objects change."""
        schemas = self._schemas
        if len(schemas) != len(tools) or not all(map(operator.is_, schemas, tools)):
            self._schemas = list(tools)
            self._tools = orjson.dumps([_tool(schema) for schema in tools])
        return self._tools


def _tool(schema: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": schema.name, "description": schema.description, "parameters": schema.parameters},
    }


def chat_messages(
    messages: Sequence[Message],
    *,
    system: str = "",
    accepts_images: bool = False,
    send_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Our conversation in the chat-completions shape (as given: ``chat_request`` makes it a
    valid conversation first).

    Tool results become ``role: tool`` messages (text only, as the API takes); when the model
    takes images, images a tool returned follow in one user message after that step's results
    (a user message between the results of one step would break the call/result pairing).
    ``ContextMessage`` becomes a user message wrapped in ``<context>`` so the model can tell it
    from what the user typed.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    pending_images: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) and pending_images:
            out.append(_tool_images(pending_images))
            pending_images = []
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message.content, accepts_images)})
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message, send_reasoning))
        elif isinstance(message, ToolResultMessage):
            text, images = _tool_content(message.content, accepts_images)
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
            if images:
                pending_images.append({"type": "text", "text": f"Images from tool call {message.call_id}:"})
                pending_images.extend(images)
        elif isinstance(message, ContextMessage):
            out.append({"role": "user", "content": f"<context>\n{message.text}\n</context>"})
    if pending_images:
        out.append(_tool_images(pending_images))
    return out


def _tool_images(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": parts}


def _assistant(message: AssistantMessage, send_reasoning: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    elif not message.text:
        entry["content"] = ""  # an assistant message needs content or tool_calls
    if send_reasoning and (message.reasoning or message.tool_calls):
        entry["reasoning_content"] = message.reasoning
    return entry


def _user_content(blocks: Iterable[ContentBlock], accepts_images: bool) -> str | list[dict[str, Any]]:
    parts = [_part(block, accepts_images) for block in blocks]
    if all(part["type"] == "text" for part in parts):
        # A plain string is what every server takes (some local ones reject part lists).
        return "\n\n".join(part["text"] for part in parts)
    return parts


def _part(block: ContentBlock, accepts_images: bool) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "image":
        if accepts_images:
            return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}
        return {"type": "text", "text": "[an image was attached, but this model does not take images]"}
    if block.type == "resource_link":
        return {"type": "text", "text": _mention(block.uri, block.name)}
    if block.type == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return {"type": "text", "text": f'<resource uri="{resource.uri}">\n{text}\n</resource>'}
        mime = resource.mime_type or "application/octet-stream"
        blob = getattr(resource, "blob", "")
        if accepts_images and mime.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{blob}"}}
        return {"type": "text", "text": f"[binary resource {resource.uri} ({mime}) not shown]"}
    return {"type": "text", "text": "[audio is not supported]"}


def _mention(uri: str, name: str) -> str:
    if uri.startswith("file://"):
        return f"[@{name}]({uri}) (file: {unquote(urlsplit(uri).path)})"
    return f"[@{name}]({uri})"


def _tool_content(blocks: Iterable[ContentBlock], accepts_images: bool) -> tuple[str, list[dict[str, Any]]]:
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for block in blocks:
        part = _part(block, accepts_images)
        if part["type"] == "text":
            texts.append(part["text"])
        else:
            images.append(part)
            texts.append("[image: shown in the next message]")
    return "\n".join(texts), images

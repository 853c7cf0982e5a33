"""An MCP server's tools and results as this agent's: registry names, argument schemas and content
blocks (the two content vocabularies are ACP's and MCP's: the same)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import mcp_types

from dsh_tools import (
    Annotations,
    AudioBlock,
    BlobResource,
    ContentBlock,
    EmbeddedResourceBlock,
    ImageBlock,
    ResourceLinkBlock,
    TextBlock,
    TextResource,
)

__all__ = ["mcp_blocks", "mcp_tool_name", "object_schema"]

_MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

# -- names and schemas ---------------------------------------------------------------------------


def mcp_tool_name(server: str, tool: str, taken: Callable[[str], bool] = lambda name: False) -> str:
    """The registry name of ``tool`` of MCP server ``server``: ``mcp__<server>__<tool>``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. A name longer than 64 characters, or one
    that ``taken`` says is in use (two tools that sanitize alike, a name another tool has), is
    cut and given a suffix hashed from the original pair, so it is the same on every run.
    """
    base = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    if len(base) <= _MAX_NAME and not taken(base):
        return base
    for attempt in itertools.count():
        digest = hashlib.sha256(f"{server}\0{tool}\0{attempt}".encode()).hexdigest()[:8]
        candidate = f"{base[: _MAX_NAME - 9]}_{digest}"
        if not taken(candidate):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def object_schema(schema: object) -> dict[str, Any]:
    """The server's input schema as-is when it describes an object (the server validates its
    own input); tool arguments are always an object, so anything else becomes the empty one."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            return schema
        if "type" not in schema and isinstance(schema.get("properties"), dict):
            return {**schema, "type": "object"}
    return {"type": "object"}


# -- results -------------------------------------------------------------------------------------


def _annotations(value: mcp_types.Annotations | None) -> Annotations | None:
    if value is None:
        return None
    return Annotations(
        audience=None if value.audience is None else tuple(value.audience),
        priority=value.priority,
        last_modified=value.last_modified,
    )


def mcp_blocks(result: mcp_types.CallToolResult) -> list[ContentBlock]:
    """MCP content as our content blocks (the two vocabularies are ACP's and MCP's: the same)."""

    blocks: list[ContentBlock] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            blocks.append(TextBlock(text=item.text, annotations=_annotations(item.annotations)))
        elif isinstance(item, mcp_types.ImageContent):
            blocks.append(
                ImageBlock(
                    data=item.data, mime_type=item.mime_type, annotations=_annotations(item.annotations)
                )
            )
        elif isinstance(item, mcp_types.AudioContent):
            blocks.append(
                AudioBlock(
                    data=item.data, mime_type=item.mime_type, annotations=_annotations(item.annotations)
                )
            )
        elif isinstance(item, mcp_types.EmbeddedResource):
            contents = item.resource
            resource: TextResource | BlobResource
            if isinstance(contents, mcp_types.TextResourceContents):
                resource = TextResource(uri=contents.uri, text=contents.text, mime_type=contents.mime_type)
            else:
                resource = BlobResource(uri=contents.uri, blob=contents.blob, mime_type=contents.mime_type)
            blocks.append(
                EmbeddedResourceBlock(resource=resource, annotations=_annotations(item.annotations))
            )
        elif isinstance(item, mcp_types.ResourceLink):
            blocks.append(
                ResourceLinkBlock(
                    uri=item.uri,
                    name=item.name,
                    title=item.title,
                    description=item.description,
                    mime_type=item.mime_type,
                    size=item.size,
                    annotations=_annotations(item.annotations),
                )
            )
    if not blocks and result.structured_content is not None:
        # The spec asks servers to mirror structured results as text; not all do, and the
        # model must see something.
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    return blocks

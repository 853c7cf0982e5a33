"""Content blocks: what a tool returns to the model and what a UI shows.

The fields mean exactly what ACP's ``ContentBlock`` fields mean, so a bridge can map them 1:1:
attributes are snake_case for Python, and ``model_dump(by_alias=True)`` gives the camelCase
wire keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "Annotations",
    "AudioBlock",
    "BlobResource",
    "ContentBlock",
    "EmbeddedResourceBlock",
    "ImageBlock",
    "ResourceLinkBlock",
    "TextBlock",
    "TextResource",
    "text",
    "text_of",
]

# defer_build: building validators costs start-up time the editor waits for; build on first use.
_CONFIG = ConfigDict(
    frozen=True, alias_generator=to_camel, populate_by_name=True, defer_build=True, extra="ignore"
)


class _Block(BaseModel):
    model_config = _CONFIG


class Annotations(_Block):
    """Hints on who a block is for and how important it is."""

    audience: tuple[Literal["user", "assistant"], ...] | None = None
    last_modified: str | None = None
    priority: float | None = None


class TextBlock(_Block):
    """Plain text (Markdown for a UI that renders it)."""

    type: Literal["text"] = "text"
    text: str
    annotations: Annotations | None = None


class ImageBlock(_Block):
    """A base64-encoded image."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str
    uri: str | None = None
    annotations: Annotations | None = None


class AudioBlock(_Block):
    """Base64-encoded audio."""

    type: Literal["audio"] = "audio"
    data: str
    mime_type: str
    annotations: Annotations | None = None


class ResourceLinkBlock(_Block):
    """A reference to a resource (a file, say) the reader can fetch."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None


class TextResource(_Block):
    """The text contents of an embedded resource."""

    uri: str
    text: str
    mime_type: str | None = None


class BlobResource(_Block):
    """The binary (base64) contents of an embedded resource."""

    uri: str
    blob: str
    mime_type: str | None = None


class EmbeddedResourceBlock(_Block):
    """A resource whose contents travel inline."""

    type: Literal["resource"] = "resource"
    resource: TextResource | BlobResource
    annotations: Annotations | None = None


ContentBlock = Annotated[
    TextBlock | ImageBlock | AudioBlock | ResourceLinkBlock | EmbeddedResourceBlock,
    Field(discriminator="type"),
]
"""Any content block, discriminated by ``type``."""


def text(value: str) -> TextBlock:
    """Shorthand for ``TextBlock(text=value)``."""
    return TextBlock(text=value)


def text_of(blocks: Iterable[ContentBlock]) -> str:
    """The text of ``blocks``: their text blocks, one after another, each on its own line (other
    blocks have no text to show)."""
    if type(blocks) is tuple and len(blocks) == 1 and type(blocks[0]) is TextBlock:
        return blocks[0].text  # most results: one text block (a generator and a join less)
    return "\n".join(block.text for block in blocks if isinstance(block, TextBlock))

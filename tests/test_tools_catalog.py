"""The Markdown tool catalog."""

from __future__ import annotations

import json

from dsh_tools import ToolSchema, tools_markdown
from reference_tools.fs import fs_tools

HEAD = (
    "# Tools\n\nThe tools the model is offered, as it sees them: each one's description, the rules "
    "it adds to the system prompt, its parameters and its exact JSON Schema (`dsh-acp tools "
    "--markdown` writes this page).\n\n"
)


def test_catalog_of_the_fs_tools() -> None:
    schemas = [tool.schema for tool in fs_tools()]
    markdown = tools_markdown(schemas)
    assert markdown == tools_markdown(schemas)  # deterministic
    assert markdown.startswith(HEAD + "## `read`\n")
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == [f"## `{schema.name}`" for schema in schemas]
    assert "| `file_path` | string | yes |" in markdown
    assert "| `replace_all` | boolean | no |" in markdown
    read = markdown.split("## `read`\n")[1].split("\n## ")[0]
    assert "In the system prompt:\n\n- Read a file before changing it" in read  # the rules it gives
    assert "In the system prompt" not in tools_markdown([ToolSchema("ping", "Ping.", {"type": "object"})])
    assert "src/\\*\\*/\\*.\\{ts,tsx\\}" not in markdown  # braces are not special
    assert "src/\\*\\*/\\*.{ts,tsx}" in markdown  # but a glob's stars are
    blocks = markdown.split("```json\n")[1:]
    assert [json.loads(block.split("\n```")[0]) for block in blocks] == [s.parameters for s in schemas]


def test_catalog_renders_nested_enum_default_and_odd_schemas() -> None:
    schema = ToolSchema(
        name="demo",
        description="A | pipe and `code` <b>.",
        parameters={
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "description": "How."},
                "tags": {"type": "array", "items": {"type": "string"}},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]},
                "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "loose": {},
            },
            "required": ["mode"],
        },
    )
    markdown = tools_markdown([schema])
    assert "A \\| pipe and \\`code\\` \\<b\\>." in markdown
    assert '| `mode` | string | yes | How. One of: `"a"`, `"b"`. Default: `"a"`. |' in markdown
    assert "| `tags` | array of string | no |  |" in markdown
    assert "| `opts.deep` | boolean | yes |  |" in markdown
    assert "| `either` | string or null | no |  |" in markdown
    assert "| `loose` | any | no |  |" in markdown


def test_catalog_without_tools_or_parameters() -> None:
    assert tools_markdown([]) == HEAD + "No tools are registered.\n"
    markdown = tools_markdown([ToolSchema(name="ping", description="Ping.", parameters={"type": "object"})])
    assert "No parameters." in markdown

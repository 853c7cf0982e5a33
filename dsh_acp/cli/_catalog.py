"""``dsh-acp tools``: list the tools the agent registers (``--markdown``: the full catalog)."""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from collections.abc import Sequence

from dsh_acp.launch._flags import build_config
from dsh_tools import DuplicateToolError, ToolRegistry, tools_markdown

__all__ = ["tools_main"]


def tools_main(argv: Sequence[str]) -> int:
    """Print the registered tools: one line each, or with ``--markdown`` the catalog in
    ``docs/tools.md`` (a test keeps that file equal to this output)."""
    parser = argparse.ArgumentParser(
        prog="dsh-acp tools",
        description="List the tools dsh-acp registers (any serve flag such as --tools MODULE:NAME applies).",
    )
    parser.add_argument("--markdown", action="store_true", help="print the full catalog as Markdown")
    args, serve_args = parser.parse_known_args(argv)
    config = build_config(serve_args)
    registry = ToolRegistry()
    try:
        # A --tools module that does not load ended build_config with its message already.
        for definition in config.tools() if config.tools else ():
            registry.register(definition)
    except DuplicateToolError as error:  # a --tools tool named like a reference tool
        print(f"dsh-acp: {error}", file=sys.stderr)
        return 2
    schemas = registry.schemas()
    if args.markdown:
        print(tools_markdown(schemas), end="")
    else:
        # Wrapped to the terminal (COLUMNS, else the terminal's width, else 80), the description
        # indented under itself so the names stay a column.
        width = max(shutil.get_terminal_size((80, 24)).columns, 40)
        indent = " " * 15
        for schema in schemas:
            first = schema.description.strip().splitlines()[0] if schema.description.strip() else ""
            lines = textwrap.wrap(first, width=width - len(indent)) or [""]
            print(f"{schema.name:<14} {lines[0]}")
            for line in lines[1:]:
                print(indent + line)
    return 0

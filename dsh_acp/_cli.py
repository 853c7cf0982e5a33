"""The ``dsh-acp`` command: serve ACP on stdio (default), or one of the helper commands."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ._config import VERSION, AgentConfig, random_ids

__all__ = ["main"]

_DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-acp",
        description="An Agent Client Protocol agent: launch it from your editor; it speaks ACP on stdio.",
    )
    parser.add_argument("--version", action="version", version=f"dsh-acp {VERSION}")
    parser.add_argument(
        "--model",
        metavar="SPEC",
        help="the model: script:PATH (a scripted model file) or openai:NAME",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity on stderr (default: warning)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=_DEFAULT_MAX_MESSAGE_BYTES,
        metavar="N",
        help="largest incoming JSON-RPC message (default: 32 MiB); larger ones are answered with an error",
    )
    parser.add_argument(
        "--no-tools", action="store_true", help="serve without the reference tools (bash, read, write...)"
    )
    return parser


def _model_config(spec: str | None, parser: argparse.ArgumentParser) -> AgentConfig:
    config = AgentConfig()
    if spec is None:
        return config
    kind, _, value = spec.partition(":")
    if kind != "script" or not value:
        parser.error(f"unknown model {spec!r}; expected script:PATH")
    from ._scripted import ScriptedModel, ScriptError

    try:
        ScriptedModel.from_file(value)  # report a broken script now, not at the first prompt
    except ScriptError as error:
        parser.exit(2, f"dsh-acp: {error}\n")
    config.model = lambda: ScriptedModel.from_file(value)
    config.model_accepts_images = True
    return config


def _reference_tools() -> list[object]:
    from reference_tools import default_tools

    return list(default_tools())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh-acp`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="dsh-acp %(levelname)s %(name)s: %(message)s",
    )
    config = _model_config(args.model, parser)
    config.session_ids = random_ids()
    if not args.no_tools:
        config.tools = _reference_tools  # type: ignore[assignment]
        config.warm_imports = ("reference_tools",)
    from ._serve import serve_stdio

    return serve_stdio(config, max_message_bytes=args.max_message_bytes)

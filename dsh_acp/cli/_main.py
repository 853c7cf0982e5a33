"""The ``dsh-acp`` command: serve ACP on stdio (default), or one of the helper commands.

The serve flags, the ``AgentConfig`` they describe and the network listener they may ask for are
``launch._flags.build_launch``.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections.abc import Sequence

from dsh_acp.launch._flags import build_launch

__all__ = ["main"]

_COMMANDS = ("tools", "login", "demo", "schema")


def _run_command(name: str, argv: Sequence[str]) -> int:
    # Each command's module loads for it alone: serving (the default) is the editor's start-up path.
    if name == "login":
        from dsh_acp.models._login import login_main

        return login_main(argv)
    if name == "demo":
        from ._demo import demo_main  # imports rich: only for this command, never on the agent's path

        return demo_main(argv)
    if name == "schema":
        from dsh_acp.testing._schema_source import schema_main

        return schema_main(argv)
    from ._catalog import tools_main

    return tools_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh-acp`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _COMMANDS:
        try:
            return _run_command(argv[0], argv[1:])
        except BrokenPipeError:  # `dsh-acp tools | head`: the reader has all it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    launch = build_launch(argv)
    config = launch.config
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, config.log_level.upper()),
        format="dsh-acp %(levelname)s %(name)s: %(message)s",
    )
    _skip_pydantic_plugins()
    if launch.listen is not None:
        from dsh_acp.remote._server import serve_network  # the server stack: never on the stdio path

        return serve_network(config, launch.listen)
    if sys.stdin.isatty():
        from ._greeting import greet  # someone typed the command: never on an editor's path

        greet(sys.stderr, config, launch.model)
    from dsh_acp.launch._stdio import serve_stdio  # not with --listen, nor for a command

    return serve_stdio(config, max_message_bytes=config.max_message_bytes)


def _skip_pydantic_plugins() -> None:
    """Keep pydantic from discovering plugins (through importlib.metadata) at the first schema
    build: the agent uses none, the discovery costs ~1.4 MiB of idle memory and ~25 ms on the
    first session, and a plugin installed for something else (an observability SDK) could cost
    far more. The stub is only consulted by pydantic 2's validator factory; if a future pydantic
    moves the loader, the stub is simply unused."""
    name = "pydantic.plugin._loader"
    if name in sys.modules:
        return
    stub = types.ModuleType(name, "dsh-acp: pydantic plugins are not loaded in the agent")
    stub.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules[name] = stub

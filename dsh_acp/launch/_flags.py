"""The serve command line: its flags, and the ``AgentConfig`` they describe.

Apart from the command itself (``cli._main``) because three readers need it: the command, ``dsh-acp
tools`` (which takes any serve flag) and the golden kit's in-process mode, so that a scenario
behaves the same in memory as over the real stdio.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_acp._config import FIXED_TIME, VERSION, AgentConfig, ModelChoice, counter_ids, default_state_dir

if TYPE_CHECKING:
    from dsh_acp.models._settings import ModelSettings
    from dsh_acp.models._source import ModelSource

    from ._listen import ListenOptions

__all__ = ["Launch", "build_config", "build_launch"]

_DEFAULTS = AgentConfig()
"""Where the command line's defaults come from: the configuration's own."""
_MIB = 1024 * 1024


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, measuring the terminal as ``shutil.get_terminal_size`` does but
    without importing ``shutil`` (and with it bz2, lzma, zlib): argparse makes a formatter for
    every argument added, and the editor waits for ``initialize`` behind that (~1.5 ms)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ):
        super().__init__(prog, indent_increment, max_help_position, _columns() if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-acp",
        usage="dsh-acp [options]\n       dsh-acp {demo,login,tools,schema} ...",
        formatter_class=_HelpFormatter,
        description=(
            "An Agent Client Protocol agent: launch it from your editor; it speaks ACP on stdio. "
            "Other commands: `dsh-acp demo` (watch it work: no model, key or editor needed), "
            "`dsh-acp tools --markdown` (the tool catalog), "
            "`dsh-acp login` (choose a provider and a model, store the key), "
            "`dsh-acp schema fetch` (download the official ACP schema the testing kit validates against)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"dsh-acp {VERSION}")
    parser.add_argument(
        "--model",
        metavar="SPEC",
        help="the model: NAME or openai:NAME (any OpenAI-compatible API), "
        "or script:PATH (a scripted model file)",
    )
    parser.add_argument(
        "--base-url", metavar="URL", help="the OpenAI-compatible API root (default: from the model)"
    )
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity on stderr (default: warning; info with --listen)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=_DEFAULTS.max_message_bytes,
        metavar="N",
        help=f"largest incoming JSON-RPC message (default: {_DEFAULTS.max_message_bytes // _MIB} MiB); "
        "larger ones are answered with an error",
    )
    parser.add_argument(
        "--no-tools", action="store_true", help="serve without the reference tools (bash, read, write...)"
    )
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="also register the tools NAME in MODULE (a tool definition, a list of them, or a function "
        "returning a list); a module that does not load stops the agent with one line on stderr",
    )
    parser.add_argument(
        "--max-model-requests",
        type=int,
        default=_DEFAULTS.max_model_requests,
        metavar="N",
        help="model requests per prompt turn (default %(default)s)",
    )
    parser.add_argument(
        "--max-task-requests",
        type=int,
        default=_DEFAULTS.max_task_requests,
        metavar="N",
        help="model requests per subagent (a task call), counted apart (default %(default)s; 0: no "
        "subagents, the task tool is not offered)",
    )
    parser.add_argument(
        "--coalesce-bytes",
        type=int,
        default=_DEFAULTS.coalesce_bytes,
        metavar="N",
        help="send live terminal output once N bytes are buffered (default %(default)s)",
    )
    parser.add_argument(
        "--coalesce-ms",
        type=float,
        default=(_DEFAULTS.coalesce_delay or 0) * 1000,
        metavar="MS",
        help="...or MS ms after the first unsent byte (default %(default)g; 0 = only on size and at the end)",
    )
    parser.add_argument(
        "--mode",
        default="default",
        choices=["default", "accept_edits", "auto", "plan", "bypass"],
        help="the permission mode new sessions start in (default: default, where edits and commands ask)",
    )
    parser.add_argument(
        "--sandbox",
        default=os.environ.get("DSH_SANDBOX", "auto"),
        choices=["auto", "off"],
        help="run commands in the OS sandbox wherever the system has one (auto, the default; "
        "$DSH_SANDBOX), or never (off: the approval rules are then the only wall)",
    )
    parser.add_argument(
        "--local-fs",
        action="store_true",
        help="read and write files on disk even when the editor offers its buffers (fs/*)",
    )
    parser.add_argument(
        "--terminals",
        default=os.environ.get("DSH_TERMINALS", "auto"),
        choices=["auto", "client", "agent"],
        help="where bash runs commands: in the client's own terminals (terminal/*) when it offers "
        "them and has no live-output convention of its own (auto, the default; $DSH_TERMINALS), "
        "whenever it offers them (client), or always in the agent (agent)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where session logs live (default: $DSH_STATE_DIR, else $XDG_STATE_HOME/dsh-acp)",
    )
    parser.add_argument(
        "--instructions",
        default="AGENTS.md",
        metavar="NAMES",
        help="comma-separated file names of project instructions, read from the session folder up"
        " to the repository root into the system prompt (default: AGENTS.md; '' reads none)",
    )
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="for golden tests: counter ids, output coalesced by size only, a fixed clock",
    )
    parser.add_argument(
        "--id-prefix",
        default="",
        metavar="TEXT",
        help="with --deterministic: prefix the counter ids (a restarted agent must not reuse them)",
    )
    _listen_arguments(parser.add_argument_group("serving over the network (see docs/remote.md)"))
    return parser


def _listen_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="serve ACP over Streamable HTTP and WebSocket at http://HOST:PORT/acp instead of stdio; "
        "clients send the bearer token in $DSH_ACP_TOKEN",
    )
    group.add_argument(
        "--no-auth",
        action="store_true",
        help="with --listen on a loopback address: accept clients without a token",
    )
    group.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --listen: a browser origin allowed to connect (requests carrying another Origin "
        "are refused); repeat for more",
    )
    group.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with --listen: how long the turns of a client that is gone keep running before they "
        "are cancelled (default %(default)g); a client that reconnects and loads the session takes "
        "it over at once",
    )
    group.add_argument(
        "--idle-timeout",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="with --listen: close a connection after this long without a message and with nothing "
        "running (default %(default)g; 0: never)",
    )


def _user_tools(specs: Sequence[str], parser: argparse.ArgumentParser) -> Callable[[], list[Any]]:
    """The ``--tools`` modules, loaded now: a broken one is reported before anything is served
    (see ``_tool_modules``)."""
    # The tools load after initialize (this module is on its path), --tools modules only if given.
    from ._tool_modules import ToolModuleError, load_tool_specs

    try:
        tools = load_tool_specs(specs)
    except ToolModuleError as error:
        parser.exit(2, f"dsh-acp: {error}\n")
    return lambda: list(tools)


def _reference_policies(registry: Any) -> None:
    from reference_tools import install_policies

    install_policies(registry)


def _reference_tools(sandbox: str) -> Callable[[], list[Any]]:
    def load() -> list[Any]:
        from dsh_tools.sandbox import sandbox_support
        from reference_tools import default_tools

        return list(default_tools(sandbox=sandbox_support(sandbox).available))

    return load


def _task_tool() -> list[Any]:
    from dsh_acp.loop._task_tool import task_tool

    return [task_tool()]


def _reference_ask_user() -> Any:
    from reference_tools import ask_user_tool

    return ask_user_tool()


class Launch:
    """What the serve command line asks for: the agent, and where to serve it (``listen``: on the
    network; ``None``: on stdio), and ``model``, the ``--model`` flag as given (the greeting on a
    terminal names the model in the editor entry it prints). A plain class: a dataclass costs its
    making on the start-up path."""

    __slots__ = ("config", "listen", "model")

    def __init__(self, config: AgentConfig, listen: ListenOptions | None, model: str | None = None) -> None:
        self.config = config
        self.listen = listen
        self.model = model


def build_launch(argv: Sequence[str]) -> Launch:
    """The agent configuration and the listener the given serve arguments describe."""
    parser = _parser()
    args = parser.parse_args(argv)
    listen = None
    if args.listen is not None:
        from ._listen import ListenError, listen_options  # not on the stdio start-up path

        try:
            listen = listen_options(
                args.listen,
                no_auth=args.no_auth,
                origins=args.allow_origin,
                grace=args.grace,
                idle_timeout=args.idle_timeout,
            )
        except ListenError as error:
            parser.exit(2, f"dsh-acp: {error}\n")
    elif args.no_auth or args.allow_origin:
        parser.error("--no-auth and --allow-origin go with --listen")
    return Launch(_config_from(args, parser), listen, args.model)


def build_config(argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> AgentConfig:
    """The agent configuration the given serve arguments describe."""
    parser = parser or _parser()
    return _config_from(parser.parse_args(argv), parser)


def _config_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> AgentConfig:
    if args.sandbox not in ("auto", "off"):  # from $DSH_SANDBOX: argparse checks only the flag
        parser.error(f"DSH_SANDBOX must be auto or off, not {args.sandbox!r}")
    config = _model_config(args.model, args.base_url, parser)
    chosen = _tool_settings(args, parser)
    if config.model_source is not None:
        # the model client and its HTTP stack: after initialize
        warm = ("dsh_acp.models._http1_client", "dsh_acp.models._openai")
        chosen["warm_imports"] = (*config.warm_imports, *warm)
    chosen.update(
        max_model_requests=args.max_model_requests,
        max_task_requests=args.max_task_requests,
        coalesce_bytes=args.coalesce_bytes,
        coalesce_delay=args.coalesce_ms / 1000 if args.coalesce_ms > 0 else None,
        force_local_fs=args.local_fs,
        instruction_files=tuple(name.strip() for name in args.instructions.split(",") if name.strip()),
        terminals=args.terminals,
        default_mode=args.mode,
        sandbox=args.sandbox,
        state_dir=Path(args.state_dir) if args.state_dir else default_state_dir(),
        log_level=args.log_level or ("info" if args.listen else "warning"),
        max_message_bytes=args.max_message_bytes,
    )
    if args.deterministic:
        chosen.update(
            session_ids=counter_ids(f"{args.id_prefix}session-"),
            message_ids=counter_ids(f"{args.id_prefix}message-"),
            coalesce_delay=None,
            clock=lambda: FIXED_TIME,
        )
    return dataclasses.replace(config, **chosen)


def _tool_settings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The tools the flags ask for (the reference tools unless ``--no-tools``, with the task tool
    unless ``--max-task-requests 0``; the ``--tools`` modules) and what comes with the reference tools."""
    sources: list[Callable[[], list[Any]]] = [] if args.no_tools else [_reference_tools(args.sandbox)]
    if sources and args.max_task_requests > 0:  # a subagent that may not ask the model cannot work
        sources.append(_task_tool)
    if args.tools:
        sources.append(_user_tools(args.tools, parser))
    chosen: dict[str, Any] = {}
    if sources:
        chosen["tools"] = lambda: [tool for source in sources for tool in source()]
        chosen["ask_user"] = None if args.no_tools else _reference_ask_user
    if not args.no_tools:
        chosen["configure_registry"] = _reference_policies
    return chosen


def _model_config(spec: str | None, base_url: str | None, parser: argparse.ArgumentParser) -> AgentConfig:
    """The models: a scripted one (``script:PATH``) or an OpenAI-compatible one resolved from
    flags, environment and the user's config file (docs/models.md has the settings table)."""
    config = AgentConfig()
    if spec is not None and spec.startswith("script:"):
        # The flag wins over every other source: no settings to read (and none of their imports
        # before the agent answers `initialize`).
        return _script_config(config, spec.removeprefix("script:"), parser)
    from dsh_acp.models._settings import SettingsError, select_model_spec
    from dsh_acp.models._source import ModelSource

    source = ModelSource.from_process(spec, base_url)
    try:
        chosen = select_model_spec(spec, source.environ, source.config_path)
        if chosen is not None and chosen.startswith("script:"):
            return _script_config(config, chosen.removeprefix("script:"), parser)
        settings = source.settings()
    except SettingsError as error:
        parser.exit(2, f"dsh-acp: {error}\n")
    config.model_source = source
    if settings is not None:
        config.models = _choices(source, settings)
        config.secrets = tuple(filter(None, [settings.api_key]))
    else:  # none yet: `dsh-acp login` may store one while the agent runs (then it is found)

        def find_models() -> list[ModelChoice]:
            try:
                found = source.settings()
            except SettingsError:
                return []
            return _choices(source, found) if found is not None else []

        config.find_models = find_models
    return config


def _choices(source: ModelSource, settings: ModelSettings) -> list[ModelChoice]:
    return [
        ModelChoice(
            id=settings.name,
            name=settings.model,
            build=source.model,
            accepts_images=settings.accepts_images,
            description=f"{settings.model} at {settings.base_url}",
            efforts=settings.reasoning_efforts,
        )
    ]


def _script_config(config: AgentConfig, path: str, parser: argparse.ArgumentParser) -> AgentConfig:
    from dsh_acp.models._scripted import ScriptedModel, ScriptError

    if not path:
        parser.error("--model script: needs a file, as in script:PATH")
    try:
        ScriptedModel.from_file(path)  # report a broken script now, not at the first prompt
    except ScriptError as error:
        parser.exit(2, f"dsh-acp: {error}\n")
    config.models = [
        ModelChoice(
            id=f"script:{Path(path).name}",
            name=f"Script {Path(path).name}",
            build=lambda: ScriptedModel.from_file(path),
            accepts_images=True,
            description="A scripted model (tests and demos)",
        )
    ]
    return config

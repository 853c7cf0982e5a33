"""What ``dsh-acp`` says on stderr when someone starts it by hand in a terminal: what it is, and how
an editor starts it.

An editor starts the agent from a folder of its own, so the command it is given must be absolute
(``.venv/bin/dsh-acp`` as typed is useless in its settings), and the entry must be whole: the
model this launch would use (flags, environment or what ``dsh-acp login`` stored) goes into its
arguments, a script by its absolute path. Loaded only on a terminal, never on the editor's path.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from typing import TextIO

from dsh_acp._config import VERSION, AgentConfig
from dsh_acp.models._settings import (
    ModelSettings,
    SettingsError,
    default_base_url,
    default_config_path,
    select_model_spec,
)

__all__ = ["greet"]


def greet(stream: TextIO, config: AgentConfig, model_flag: str | None) -> None:
    """Write the greeting for this launch (``model_flag``: ``--model`` as given) to ``stream``."""
    command = agent_command(sys.argv[0] if sys.argv else "dsh-acp", os.environ)
    model_args, notes = _model(config, model_flag, os.environ, shlex.join([*command, "login"]))
    run = [*command, *model_args]
    entry = {"type": "custom", "command": run[0], "args": run[1:], "env": {}}
    stream.write(
        f"dsh-acp {VERSION}: an Agent Client Protocol agent. Editors start it and speak JSON-RPC\n"
        "on its stdin and stdout, so there is nothing to type here.\n"
        f"  Watch it work:  {shlex.join([*command, 'demo'])}    (a scripted bug fix; no model, no key)\n"
        + "".join(f"  {note}\n" for note in notes)
        + "  Zed, in settings.json:\n"
        f"    {json.dumps({'agent_servers': {'dsh-acp': entry}})[1:-1]}\n"
        f"  Toad:           toad acp {shlex.quote(shlex.join(run))} .\n"
        "  More:           dsh-acp --help, and the README's 'Use it in your editor'.\n"
        "Serving on stdin/stdout now; Ctrl+C quits.\n"
    )
    stream.flush()


def agent_command(typed: str, environ: Mapping[str, str]) -> list[str]:
    """The command that starts this agent from anywhere: the path as typed made absolute (a
    relative path, or a name found on ``PATH``); ``python -m dsh_acp`` by its interpreter."""
    if os.path.basename(typed) == "dsh-acp":
        found = typed if os.sep in typed else shutil.which(typed, path=environ.get("PATH"))
        if found is not None:
            return [os.path.abspath(found)]
    beside = os.path.join(os.path.dirname(sys.executable), "dsh-acp")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [os.path.abspath(beside)]
    return [os.path.abspath(sys.executable), "-m", "dsh_acp"]


def _model(
    config: AgentConfig, model_flag: str | None, environ: Mapping[str, str], login: str
) -> tuple[list[str], list[str]]:
    """The arguments that name this launch's model, and what to tell the user about it."""
    if config.model_source is not None:
        try:
            settings = config.model_source.settings()
        except SettingsError as error:
            return [], [f"The model settings are broken: {error}"]
        if settings is not None:
            return _openai_args(settings), _key_notes(settings, login)
    elif config.models:
        spec = select_model_spec(model_flag, environ, default_config_path(environ)) or ""
        if spec.startswith("script:"):
            return ["--model", "script:" + os.path.abspath(spec.removeprefix("script:"))], []
    return [], [f"No model yet:   {login}   (choose a provider and a model, store the key)"]


def _openai_args(settings: ModelSettings) -> list[str]:
    # A name with a colon (an Ollama tag) keeps its prefix, or it would read as a provider.
    name = f"openai:{settings.model}" if ":" in settings.model else settings.model
    args = ["--model", name]
    if settings.base_url != default_base_url(settings.model).rstrip("/"):
        args += ["--base-url", settings.base_url]
    return args


def _key_notes(settings: ModelSettings, login: str) -> list[str]:
    if settings.api_key is None:
        if not settings.key_required:  # a server on this machine
            return []
        return [f"No API key yet: {login} stores one, or set {settings.key_hint} in the entry's env"]
    if settings.key_source is not None and not settings.key_source.startswith("api_key in "):
        return [
            f"The key comes from {settings.key_source} in this shell: an editor started elsewhere may "
            f"not have it (put it in the entry's env, or store it with {login})"
        ]
    return []

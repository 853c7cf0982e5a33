"""``--tools MODULE:NAME``: the user's tool modules, loaded and checked when the flags are read.

``NAME`` is a tool definition, a list of them, or a function returning a list. A module that
does not import, a name it does not define, a value that is none of those, a definition
``define_tool`` refused: each is one line naming the flag, said
before the agent serves anything (the command exits with status 2), and the same line is what
``dsh-acp tools --tools …`` prints. Loading later, at the first prompt, left an editor with an
agent that started normally and failed every turn.

The import happens before the protocol's stdout is guarded (``rpc._protocol_fds``), so what a
module prints while it loads is sent to stderr: a stray ``print`` must not become a line on the
wire. The cost is the module's own import time, paid before ``initialize`` is answered, and only
by agents started with ``--tools``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from dsh_tools import ToolDefinition

__all__ = ["ToolModuleError", "load_tool_specs"]


_LIMIT = 400
"""Characters of the message: an exception's text can be long (a whole traceback's worth)."""


class ToolModuleError(ValueError):
    """A ``--tools`` spec that gives no usable tools; the message is one line naming the flag."""

    def __init__(self, message: str) -> None:
        message = " ".join(message.split())
        super().__init__(message if len(message) <= _LIMIT else message[: _LIMIT - 1] + "…")


_INSTALLED = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NOT_THEIRS = (
    *(os.path.join(_INSTALLED, package) for package in ("dsh_acp", "dsh_tools", "reference_tools")),
    os.path.dirname(os.__file__),
)
"""Where dsh-acp's packages and the standard library are: their frames are not where the
user's mistake is."""


def _where(error: BaseException) -> str:
    """Where in the user's code ``error`` was raised: ``" (tools.py:12)"``, or nothing."""
    if isinstance(error, SyntaxError):
        return f" ({os.path.basename(error.filename)}:{error.lineno})" if error.filename else ""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(("<", *(os.path.join(p, "") for p in _NOT_THEIRS)))
    ]
    return f" ({os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def _describe(error: BaseException) -> str:
    if isinstance(error, ModuleNotFoundError) and error.name:
        return f"no module named {error.name!r} (not on PYTHONPATH or installed)"
    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg}"
    said = str(error)
    if type(error).__name__ == "ToolDefinitionError":  # its message says what it is
        return said
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


def _candidates(module: Any) -> list[str]:
    names = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if isinstance(value, ToolDefinition) or (
            isinstance(value, list | tuple) and value and all(isinstance(v, ToolDefinition) for v in value)
        ):
            names.append(name)
    return names


def _resolve(spec: str, module_name: str, attribute: str) -> list[ToolDefinition]:
    try:
        with contextlib.redirect_stdout(sys.stderr):
            module = importlib.import_module(module_name)
    except Exception as error:
        said = f"cannot import {module_name}: {_describe(error)}{_where(error)}"
        raise ToolModuleError(f"--tools {spec}: {said}") from None
    if not hasattr(module, attribute):
        found = _candidates(module)
        hint = f" (it has {', '.join(found)})" if found else ""
        raise ToolModuleError(f"--tools {spec}: {module_name} has no {attribute!r}{hint}")
    value = getattr(module, attribute)
    if callable(value) and not isinstance(value, ToolDefinition):
        try:
            with contextlib.redirect_stdout(sys.stderr):
                value = value()
        except Exception as error:
            raise ToolModuleError(
                f"--tools {spec}: {attribute}() raised {_describe(error)}{_where(error)}"
            ) from None
    if isinstance(value, ToolDefinition):
        return [value]
    if not isinstance(value, list | tuple):
        raise ToolModuleError(
            f"--tools {spec}: {attribute} is a {type(value).__name__}, not a tool definition, a list of"
            " them or a function returning one"
        )
    for index, item in enumerate(value):
        if not isinstance(item, ToolDefinition):
            raise ToolModuleError(
                f"--tools {spec}: item {index} of {attribute} is a {type(item).__name__}, not a tool "
                "definition (make one with dsh_tools.define_tool)"
            )
    return list(value)


def load_tool_specs(specs: Sequence[str]) -> list[ToolDefinition]:
    """The tools of every ``MODULE:NAME`` in ``specs``, in order; ``ToolModuleError`` for the
    first that gives none, or for a tool name two of them share."""
    tools: list[ToolDefinition] = []
    owner: dict[str, str] = {}
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        if not module_name or not attribute:
            raise ToolModuleError(f"--tools takes MODULE:NAME, not {spec!r}")
        for tool in _resolve(spec, module_name, attribute):
            if tool.name in owner:
                where = "twice" if owner[tool.name] == spec else f"also by --tools {owner[tool.name]}"
                raise ToolModuleError(f"--tools {spec}: a tool named {tool.name!r} is given {where}")
            owner[tool.name] = spec
            tools.append(tool)
    return tools

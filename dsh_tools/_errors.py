"""The harness's error classes: each carries a stable machine-readable ``code``."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DuplicateToolError",
    "HarnessError",
    "ToolArgsError",
    "ToolDefinitionError",
    "ToolDeniedError",
    "ToolError",
    "ToolMetaError",
    "ToolNotFoundError",
]


class HarnessError(Exception):
    """Base of the errors the harness raises on purpose.

    ``name`` (the class name) and ``code`` travel with a failed tool result as ``{name, code}``
    so that retry and sandbox plugins, and a replay, can route on them without parsing text.
    """

    default_code = "HARNESS_ERROR"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code

    @property
    def name(self) -> str:
        """The error's class name, e.g. ``"ToolNotFoundError"``."""
        return type(self).__name__


class ToolNotFoundError(HarnessError):
    """A call named a tool that is not registered."""

    default_code = "UNKNOWN_TOOL"

    def __init__(self, tool: str) -> None:
        super().__init__(f'unknown tool "{tool}"')
        self.tool = tool


class ToolArgsError(HarnessError):
    """A call's arguments do not match the tool's parameter schema."""

    default_code = "INVALID_ARGS"

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations: tuple[str, ...] = tuple(violations)
        super().__init__("invalid arguments: " + "; ".join(self.violations))


class DuplicateToolError(HarnessError):
    """A tool name is already registered somewhere in the registry stack."""

    default_code = "DUPLICATE_TOOL"

    def __init__(self, tool: str) -> None:
        super().__init__(f'tool "{tool}" is already registered')
        self.tool = tool


class ToolDefinitionError(HarnessError, ValueError):
    """A tool definition is malformed; the message lists every problem at once."""

    default_code = "INVALID_DEFINITION"

    def __init__(self, tool: str, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__(f'invalid tool definition "{tool}": ' + "; ".join(self.problems))


class ToolDeniedError(HarnessError):
    """The pre-execute gate (a policy or a person) refused the call."""

    default_code = "DENIED"


class ToolMetaError(HarnessError):
    """A tool returned a ``meta`` payload that cannot be serialized to JSON."""

    default_code = "INVALID_META"


class ToolError(HarnessError):
    """Raised by a tool body to fail the call with a clean, model-facing message."""

    default_code = "TOOL_ERROR"

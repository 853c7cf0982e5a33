"""Tool schemas and definitions, and ``define_tool``, the typed way to write one."""

from __future__ import annotations

import copy
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, TypeVar, cast, overload

from ._errors import ToolArgsError, ToolDefinitionError
from ._execution import ApprovalSubject, ToolExecution, ToolResult
from ._kinds import TOOL_KINDS, ToolKind
from ._schema import SchemaSpec, check_schema_spec, schema_spec_to_json_schema, validate_args

if TYPE_CHECKING:  # pydantic is imported only for a tool whose parameters are a pydantic model
    from pydantic import BaseModel, ValidationError

    from ._content import ContentBlock
    from ._views import ToolCallView, ToolResultView

__all__ = [
    "ExecuteReturn",
    "ToolDefinition",
    "ToolOutput",
    "ToolSchema",
    "define_tool",
]

_log = logging.getLogger("dsh_tools")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

_STREAMING: ContextVar[bool] = ContextVar("dsh_tools_streaming", default=False)
"""Set while a presenter draws arguments still streaming: incomplete arguments are expected
not to parse, so their failures are logged at debug level, not as warnings."""


def _complain(message: str, *args: Any, exc_info: bool = False) -> None:
    (_log.debug if _STREAMING.get() else _log.warning)(message, *args, exc_info=exc_info)


M = TypeVar("M", bound="BaseModel")
A = TypeVar("A")


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """``execute``'s full return form: model-facing content plus an opaque presentation ``meta``.

    ``meta`` must be JSON-serializable: it is persisted with the result and handed back to
    ``present_result`` when a loaded session is replayed, which draws the card again from it.
    """

    content: Sequence[ContentBlock]
    meta: Any = None
    is_error: bool = False
    """A failed call that still has something to show (a command that timed out keeps its output
    and exit status in ``meta``); raise instead when there is nothing but an error message."""


ExecuteReturn: TypeAlias = "Sequence[ContentBlock] | ToolOutput | str"
"""A list of content blocks, a ``ToolOutput``, or a plain string (one text block)."""


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What the model is shown of a tool: name, description and JSON-Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    prompt_rules: tuple[str, ...] = ()
    """What the system prompt tells the model for this tool's sake (see ``ToolDefinition``)."""


def _identity(arguments: Any) -> Any:
    return arguments


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    """A registered tool: its schema, its body and how it presents itself.

    Build one with ``define_tool`` (typed, validated arguments). Constructing it directly is the
    raw form for JSON-Schema tools supplied by others (MCP servers): then ``parse_arguments`` is
    the identity and the tool validates its own input.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[[Any, ToolExecution], Awaitable[ExecuteReturn]]
    """Runs the call with the parsed arguments."""
    present_call: Callable[[Any], ToolCallView | None] | None = None
    """Pure: the pending card for raw arguments, or ``None`` for the generic one."""
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None
    """Pure: the completed card for raw arguments and the result, or ``None``."""
    kind: ToolKind = "other"
    read_only: bool = False
    parallel_safe: bool = False
    """Whether calls may run concurrently with other parallel-safe calls of the same step."""
    parse_arguments: Callable[[Any], Any] = field(default=_identity)
    """Turns raw arguments into what ``execute`` takes; raises ``ToolArgsError`` when invalid."""
    approval_subject: Callable[[Any, ToolExecution], ApprovalSubject | None] | None = None
    """What a person approving a call of this tool is asked about, when that is narrower than
    the tool (``bash``: the command line and where it runs); ``None``: the tool itself."""
    prompt_rules: tuple[str, ...] = ()
    """Rules of use the system prompt states for this tool, one sentence each (``bash``: commands
    get no input). A rule several tools give in the same words is stated once, where the first
    of them is registered; the tool's own description says the rest."""
    preview: Callable[[Any, ToolExecution], Awaitable[ToolCallView | None]] | None = None
    """The card a person approving the call is shown, computed from what the call would do now
    (``edit``: the whole file before and after), or ``None`` for ``present_call``'s card. A host
    runs it only before asking, and only when every path the call's card names is one it may
    read unasked (inside the workspace); it must read nothing else and change nothing."""
    sandboxed: bool = False
    """Whether what its calls do is confined by the session's ``dsh_tools.sandbox.CommandSandbox``
    (``bash``: its commands run in the sandbox, at the level the permission gate granted): a
    permission mode may then let a call run unasked that it would otherwise ask about."""

    def subject_of(self, execution: ToolExecution) -> ApprovalSubject | None:
        """``approval_subject`` made safe: arguments it cannot read give ``None`` (the tool)."""
        if self.approval_subject is None:
            return None
        try:
            return self.approval_subject(execution.arguments, execution)
        except Exception:
            _log.debug("approval_subject of tool %r failed on its arguments", self.name, exc_info=True)
            return None

    @property
    def schema(self) -> ToolSchema:
        """A deep copy of the model-facing schema."""
        return ToolSchema(self.name, self.description, copy.deepcopy(self.parameters), self.prompt_rules)

    def call_view(self, arguments: Any) -> ToolCallView | None:
        """``present_call`` made safe for a UI: a raising presenter gives ``None`` and a warning."""
        if self.present_call is None:
            return None
        try:
            return self.present_call(arguments)
        except Exception:
            _complain("present_call of tool %r failed; using the generic card", self.name, exc_info=True)
            return None

    def streaming_view(self, arguments: Any) -> ToolCallView | None:
        """``call_view`` for arguments that are still streaming (incomplete, often invalid):
        ``None`` when they do not present, with nothing logged above debug level."""
        token = _STREAMING.set(True)
        try:
            return self.call_view(arguments)
        finally:
            _STREAMING.reset(token)

    async def approval_view(self, execution: ToolExecution) -> ToolCallView | None:
        """``preview`` made safe for a UI: none, or one that fails, gives ``None`` (the call's
        own card), with a warning for a failure."""
        if self.preview is None:
            return None
        try:
            return await self.preview(execution.arguments, execution)
        except Exception:
            _log.warning("preview of tool %r failed; showing its call card", self.name, exc_info=True)
            return None

    def result_view(self, arguments: Any, result: ToolResult) -> ToolResultView | None:
        """``present_result`` made safe for a UI: a raising presenter gives ``None`` and a warning."""
        if self.present_result is None:
            return None
        try:
            return self.present_result(arguments, result)
        except Exception:
            _log.warning("present_result of tool %r failed; using the generic card", self.name, exc_info=True)
            return None


def _pydantic_violations(error: ValidationError) -> list[str]:
    out = []
    for item in error.errors(include_url=False):
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in item["loc"]).lstrip(".")
        out.append(f'"{path or "arguments"}": {item["msg"]}')
    return out


def _model_parser(model: type[M]) -> Callable[[Any], M]:
    from pydantic import ValidationError

    def parse(arguments: Any) -> M:
        if not isinstance(arguments, dict):
            raise ToolArgsError(['"arguments" must be an object'])
        try:
            return model.model_validate(arguments)
        except ValidationError as error:
            raise ToolArgsError(_pydantic_violations(error)) from None

    return parse


def _is_model(cls: type) -> TypeGuard[type[BaseModel]]:
    """Whether ``cls`` is a pydantic model, without importing pydantic for a ``SchemaSpec`` tool
    (a class cannot be a model unless pydantic is already loaded)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and issubclass(cls, pydantic.BaseModel)


def _spec_parser(spec: SchemaSpec) -> Callable[[Any], dict[str, Any]]:
    def parse(arguments: Any) -> dict[str, Any]:
        violations = validate_args(spec, arguments)
        if violations:
            raise ToolArgsError(violations)
        result: dict[str, Any] = arguments
        return result

    return parse


def _soft(name: str, parse: Callable[[Any], A], present: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a presenter so that it never raises: arguments that do not parse (an old log, a bad
    model) and a presenter that fails both give ``None``, the generic card."""

    def wrapper(arguments: Any, *rest: Any) -> Any:
        try:
            parsed = parse(arguments)
        except ToolArgsError as error:
            _complain("tool %r: not presenting malformed arguments (%s)", name, error)
            return None
        try:
            return present(parsed, *rest)
        except Exception:
            _complain("a presenter of tool %r failed; using the generic card", name, exc_info=True)
            return None

    return wrapper


def _soft_preview(
    parse: Callable[[Any], A], preview: Callable[[A, ToolExecution], Awaitable[Any]]
) -> Callable[[Any, ToolExecution], Awaitable[Any]]:
    """Wrap a preview so that arguments that do not parse give ``None`` (the call's own card)."""

    async def wrapper(arguments: Any, execution: ToolExecution) -> Any:
        try:
            parsed = parse(arguments)
        except ToolArgsError:
            return None
        return await preview(parsed, execution)

    return wrapper


@overload
def define_tool(
    *,
    name: str,
    description: str,
    parameters: type[M],
    execute: Callable[[M, ToolExecution], Awaitable[ExecuteReturn]],
    present_call: Callable[[M], ToolCallView | None] | None = None,
    present_result: Callable[[M, ToolResult], ToolResultView | None] | None = None,
    preview: Callable[[M, ToolExecution], Awaitable[ToolCallView | None]] | None = None,
    kind: ToolKind = "other",
    read_only: bool = False,
    parallel_safe: bool | None = None,
    approval_subject: Callable[[Any, ToolExecution], ApprovalSubject | None] | None = None,
    prompt_rules: Sequence[str] = (),
    sandboxed: bool = False,
) -> ToolDefinition: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    parameters: SchemaSpec,
    execute: Callable[[dict[str, Any], ToolExecution], Awaitable[ExecuteReturn]],
    present_call: Callable[[dict[str, Any]], ToolCallView | None] | None = None,
    present_result: Callable[[dict[str, Any], ToolResult], ToolResultView | None] | None = None,
    preview: Callable[[dict[str, Any], ToolExecution], Awaitable[ToolCallView | None]] | None = None,
    kind: ToolKind = "other",
    read_only: bool = False,
    parallel_safe: bool | None = None,
    approval_subject: Callable[[Any, ToolExecution], ApprovalSubject | None] | None = None,
    prompt_rules: Sequence[str] = (),
    sandboxed: bool = False,
) -> ToolDefinition: ...


def define_tool(
    *,
    name: str,
    description: str,
    parameters: SchemaSpec | type[BaseModel],
    execute: Callable[[Any, ToolExecution], Awaitable[ExecuteReturn]],
    present_call: Callable[[Any], ToolCallView | None] | None = None,
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None,
    preview: Callable[[Any, ToolExecution], Awaitable[ToolCallView | None]] | None = None,
    kind: ToolKind = "other",
    read_only: bool = False,
    parallel_safe: bool | None = None,
    approval_subject: Callable[[Any, ToolExecution], ApprovalSubject | None] | None = None,
    prompt_rules: Sequence[str] = (),
    sandboxed: bool = False,
) -> ToolDefinition:
    """Define a tool whose arguments are validated before ``execute`` runs.

    ``parameters`` is a ``SchemaSpec`` (``execute`` gets the validated ``dict``) or a pydantic
    model class (``execute`` gets a validated instance; the JSON Schema is the model's). The
    schema and validator are built once, here; a malformed definition raises one
    ``ToolDefinitionError`` listing every problem. ``parallel_safe`` defaults to ``read_only``.
    ``approval_subject`` gets the raw arguments (it must not trust them) and the execution.
    ``prompt_rules`` are sentences for the system prompt's rules (one line each).
    ``sandboxed``: the tool's effects are confined by the session's sandbox (see ``ToolDefinition``).
    The presenters receive the same parsed arguments; they are wrapped so that arguments that
    do not parse give ``None`` (the generic card) instead of an exception. ``preview`` (async,
    the parsed arguments and the execution) gives the card a person approving the call sees
    (see ``ToolDefinition.preview``).
    """
    rules = (prompt_rules,) if isinstance(prompt_rules, str) else tuple(prompt_rules)
    problems = _field_problems(
        name,
        description,
        kind,
        rules if not isinstance(prompt_rules, str) else None,
        (
            ("execute", execute, False),
            ("present_call", present_call, True),
            ("present_result", present_result, True),
            ("preview", preview, True),
        ),
    )
    json_schema, parse, schema_problems = _parameters(parameters)
    problems += schema_problems
    if problems:
        raise ToolDefinitionError(str(name), problems)

    return ToolDefinition(
        name=name,
        description=description,
        parameters=json_schema,
        execute=execute,
        present_call=None if present_call is None else _soft(name, parse, present_call),
        present_result=None if present_result is None else _soft(name, parse, present_result),
        preview=None if preview is None else _soft_preview(parse, preview),
        kind=kind,
        read_only=read_only,
        parallel_safe=read_only if parallel_safe is None else parallel_safe,
        parse_arguments=parse,
        approval_subject=approval_subject,
        prompt_rules=rules,
        sandboxed=sandboxed,
    )


def _field_problems(
    name: object,
    description: object,
    kind: object,
    rules: tuple[object, ...] | None,
    callables: tuple[tuple[str, object, bool], ...],
) -> list[str]:
    """What is wrong with a definition's fields other than its parameters (``rules`` is ``None``
    when ``prompt_rules`` was one string, not a sequence of them)."""
    problems: list[str] = []
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append("name must be 1-64 characters of letters, digits, '_' or '-'")
    if not isinstance(description, str) or not description.strip():
        problems.append("description must be a non-empty string")
    problems += [
        f"{label} must be callable" + (" or None" if optional else "")
        for label, value, optional in callables
        if not _callable_or_absent(value, optional)
    ]
    if kind not in TOOL_KINDS:
        problems.append(f"kind must be one of {list(TOOL_KINDS)}, not {kind!r}")
    if rules is None or not all(
        isinstance(rule, str) and rule.strip() and "\n" not in rule for rule in rules
    ):
        problems.append("prompt_rules must be a sequence of non-empty one-line strings")
    return problems


def _callable_or_absent(value: object, optional: bool) -> bool:
    return callable(value) or (optional and value is None)


def _parameters(
    parameters: SchemaSpec | type[BaseModel],
) -> tuple[dict[str, Any], Callable[[Any], Any], list[str]]:
    """The JSON Schema of a tool's parameters, the parser of its arguments, and what is wrong
    with the parameters (the schema is ``{}`` when it cannot be made)."""
    if isinstance(parameters, type) and _is_model(parameters):
        try:
            json_schema = parameters.model_json_schema()
        except Exception as error:  # a model pydantic cannot express as JSON Schema
            return {}, _model_parser(parameters), [f"parameters model has no JSON Schema: {error}"]
        return json_schema, _model_parser(parameters), []
    spec = cast("SchemaSpec", parameters)
    spec_problems = check_schema_spec(spec)
    json_schema = {} if spec_problems else schema_spec_to_json_schema(spec)
    return json_schema, _spec_parser(spec), [f"parameters: {problem}" for problem in spec_problems]

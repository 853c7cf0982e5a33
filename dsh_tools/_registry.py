"""The tool registry and its execution pipeline: validate → pre-execute gate → dispatch →
post-execute inspection."""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ._definition import ToolDefinition, ToolOutput, ToolSchema
from ._errors import (
    DuplicateToolError,
    HarnessError,
    ToolDeniedError,
    ToolMetaError,
    ToolNotFoundError,
)
from ._execution import (
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    PostToolDecision,
    PreToolDecision,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionResult,
)
from ._text import json_safe

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from ._content import ContentBlock

__all__ = [
    "ChangeListener",
    "Disposer",
    "PostExecuteListener",
    "PostNext",
    "PreExecuteListener",
    "PreNext",
    "ToolChange",
    "ToolRegistry",
]

_log = logging.getLogger("dsh_tools")

PreNext = Callable[[], Awaitable[PreToolDecision]]
PostNext = Callable[[], Awaitable[PostToolDecision]]
PreExecuteListener = Callable[[ToolExecution, PreNext], Awaitable[PreToolDecision]]
"""``(exec, next)``: return a decision, or ``await next()`` to defer to later listeners."""
PostExecuteListener = Callable[[ToolExecution, ToolExecutionResult, PostNext], Awaitable[PostToolDecision]]
"""``(exec, result, next)``: return a decision, or ``await next()`` to defer."""


@dataclass(frozen=True, slots=True)
class ToolChange:
    """A tool appeared in or disappeared from a registry's view."""

    kind: Literal["registered", "unregistered"]
    name: str


ChangeListener = Callable[[ToolChange], None]

_ALLOW = Allow()
_ACCEPT = Accept()


def _text_block(text: str) -> ContentBlock:
    # The content models are pydantic's: loaded by the first result, not by a registry's creation.
    from ._content import TextBlock

    return TextBlock(text=text)


class Disposer:
    """Undoes a registration. Call it (idempotent) or use it as a context manager."""

    __slots__ = ("_undo",)

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo: Callable[[], None] | None = undo

    def __call__(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()

    def __enter__(self) -> Disposer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self()


def _error_result(execution: ToolExecution, error: Exception) -> ToolExecutionResult:
    if isinstance(error, HarnessError):
        return ToolExecutionResult(
            call_id=execution.call_id,
            content=(_text_block(f"Error: {error.message}"),),
            is_error=True,
            error=ToolErrorInfo(name=error.name, code=error.code),
        )
    detail = str(error)
    message = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    return ToolExecutionResult(
        call_id=execution.call_id, content=(_text_block(f"Error: {message}"),), is_error=True
    )


@functools.cache
def _content_adapter() -> TypeAdapter[ContentBlock]:
    # Built on first use: building validators at import costs the editor's start-up wait.
    from pydantic import TypeAdapter

    from ._content import ContentBlock

    return TypeAdapter(ContentBlock)


def _content_tuple(blocks: Iterable[Any]) -> tuple[ContentBlock, ...]:
    # Blocks a tool built itself are trusted; dicts (say, from an MCP server) are validated.
    from ._content import AudioBlock, EmbeddedResourceBlock, ImageBlock, ResourceLinkBlock, TextBlock

    kinds = (TextBlock, ImageBlock, AudioBlock, ResourceLinkBlock, EmbeddedResourceBlock)
    return tuple(
        block if isinstance(block, kinds) else _content_adapter().validate_python(block) for block in blocks
    )


def _json_meta(execution: ToolExecution, meta: Any) -> Any:
    try:
        orjson.dumps(meta)
    except TypeError as error:
        if "surrogates" in str(error):  # a name from the OS that is not UTF-8: shown escaped
            return _json_meta(execution, json_safe(meta))
        raise ToolMetaError(
            f'tool "{execution.name}" returned meta that is not JSON-serializable: {error}'
        ) from None
    return meta


def _normalize(execution: ToolExecution, returned: Any) -> ToolExecutionResult:
    meta = None
    if isinstance(returned, ToolOutput):
        meta = None if returned.meta is None else _json_meta(execution, returned.meta)
        content = _content_tuple(returned.content)
    elif isinstance(returned, str):
        content = (_text_block(returned),)
    elif isinstance(returned, list | tuple):
        content = _content_tuple(returned)
    else:
        raise TypeError(
            f'tool "{execution.name}" returned {type(returned).__name__}; '
            "expected a list of content blocks, a ToolOutput or a str"
        )
    is_error = isinstance(returned, ToolOutput) and returned.is_error
    return ToolExecutionResult(call_id=execution.call_id, content=content, is_error=is_error, meta=meta)


class ToolRegistry:
    """Holds tool definitions and runs calls through the pipeline.

    A registry can be a layer over a parent (a session's tools over the process-wide ones):
    lookups and ``schemas()`` see the whole stack, names are unique across it, and the parent's
    listeners run before the layer's own. ``close()`` removes only the layer's tools. A layer may
    hide tools of the stack below it (``layer(without=...)``): it neither shows nor runs them.
    """

    def __init__(self, parent: ToolRegistry | None = None, without: Iterable[str] = ()) -> None:
        self._parent = parent
        self._hidden = frozenset(without)
        self._tools: dict[str, ToolDefinition] = {}
        self._pre: list[PreExecuteListener] = []
        self._post: list[PostExecuteListener] = []
        self._change: list[ChangeListener] = []
        # Made on the first child: most layers (one per session) never get one, and an empty
        # WeakSet costs about 1 KB.
        self._children: weakref.WeakSet[ToolRegistry] | None = None
        if parent is not None:
            if parent._children is None:
                parent._children = weakref.WeakSet()
            parent._children.add(self)

    # -- layers ---------------------------------------------------------------------------

    def layer(self, without: Iterable[str] = ()) -> ToolRegistry:
        """A new registry stacked on this one, hiding the tools named in ``without`` (a
        subagent's tools are its session's but the one that starts subagents)."""
        return ToolRegistry(self, without)

    def close(self) -> None:
        """Unregister this layer's tools and listeners and detach it from its parent."""
        for name in list(self._tools):
            self._unregister(name)
        self._pre.clear()
        self._post.clear()
        self._change.clear()
        if self._parent is not None and self._parent._children is not None:
            self._parent._children.discard(self)

    def _chain(self) -> list[ToolRegistry]:
        chain: list[ToolRegistry] = []
        registry: ToolRegistry | None = self
        while registry is not None:
            chain.append(registry)
            registry = registry._parent
        chain.reverse()
        return chain

    def _descendants(self) -> Iterable[ToolRegistry]:
        for child in list(self._children or ()):
            yield child
            yield from child._descendants()

    # -- tools ----------------------------------------------------------------------------

    def register(self, definition: ToolDefinition) -> Disposer:
        """Add a tool; the returned ``Disposer`` removes it. A taken name raises ``DuplicateToolError``."""
        name = definition.name
        if self.get(name) is not None or any(name in d._tools for d in self._descendants()):
            raise DuplicateToolError(name)
        self._tools[name] = definition
        self._emit(ToolChange("registered", name))

        def undo() -> None:
            if self._tools.get(name) is definition:
                self._unregister(name)

        return Disposer(undo)

    def _unregister(self, name: str) -> None:
        del self._tools[name]
        self._emit(ToolChange("unregistered", name))

    def get(self, name: str) -> ToolDefinition | None:
        """The definition named ``name`` anywhere in the stack, else ``None`` (also when a
        layer on the way hides it)."""
        registry: ToolRegistry | None = self
        while registry is not None:
            if name in registry._hidden:
                return None
            found = registry._tools.get(name)
            if found is not None:
                return found
            registry = registry._parent
        return None

    def definitions(self) -> list[ToolDefinition]:
        """Every visible definition: the parent's first, each layer in registration order."""
        return [d for registry in self._chain() for d in registry._tools.values() if self.get(d.name) is d]

    def schemas(self) -> list[ToolSchema]:
        """The model-facing schemas (deep copies; never ``execute`` nor the presenters)."""
        return [d.schema for d in self.definitions()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self.definitions())

    # -- listeners ------------------------------------------------------------------------

    def on_change(self, listener: ChangeListener) -> Disposer:
        """Call ``listener`` whenever a tool appears or disappears in this registry's view."""
        return self._add(self._change, listener)

    def on_pre_execute(self, listener: PreExecuteListener) -> Disposer:
        """Add a gate listener; the first added runs first."""
        return self._add(self._pre, listener)

    def on_post_execute(self, listener: PostExecuteListener) -> Disposer:
        """Add a result listener; the first added runs first."""
        return self._add(self._post, listener)

    @staticmethod
    def _add(listeners: list[Any], listener: Any) -> Disposer:
        listeners.append(listener)

        def undo() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return Disposer(undo)

    def _emit(self, change: ToolChange) -> None:
        for registry in (self, *self._descendants()):
            for listener in list(registry._change):
                try:
                    listener(change)
                except Exception:
                    _log.exception("a tools change listener failed")

    # -- execution ------------------------------------------------------------------------

    async def execute(self, execution: ToolExecution) -> ToolExecutionResult:
        """Run one call through the whole pipeline. Never raises, except cancellation.

        Order: look up → validate arguments → pre-execute waterfall (→ approver on ``ask``) →
        ``on_dispatch`` → the tool → post-execute waterfall. Every failure on the way becomes an
        ``is_error`` result that still passes through post-execute.
        """
        try:
            definition = self.get(execution.name)
            if definition is None:
                raise ToolNotFoundError(execution.name)
            arguments = definition.parse_arguments(execution.arguments)
            decision = await self._gate(execution)
            if isinstance(decision, Ask):
                decision = await self._ask(execution, decision)
            if isinstance(decision, Deny):
                raise ToolDeniedError(decision.reason)
            if execution.on_dispatch is not None:
                await execution.on_dispatch(execution)
            result = _normalize(execution, await definition.execute(arguments, execution))
        except Exception as error:
            result = _error_result(execution, error)
        try:
            return await self._inspect(execution, result)
        except Exception as error:
            return _error_result(execution, error)

    async def _ask(self, execution: ToolExecution, ask: Ask) -> Allow | Deny:
        if execution.approver is None:
            why = f" ({ask.reason})" if ask.reason else ""
            return Deny(f"this call needs approval{why} and nobody can approve it here")
        decision = await execution.approver(execution, ask)
        if not isinstance(decision, Allow | Deny):
            raise TypeError(f"the approver returned {decision!r}; expected Allow or Deny")
        return decision

    async def _gate(self, execution: ToolExecution) -> PreToolDecision:
        listeners = [listener for registry in self._chain() for listener in registry._pre]
        if not listeners:
            return _ALLOW

        async def step(index: int) -> PreToolDecision:
            if index == len(listeners):
                return _ALLOW
            decision = await listeners[index](execution, lambda: step(index + 1))
            if not isinstance(decision, Allow | Deny | Ask):
                raise TypeError(f"a pre-execute listener returned {decision!r}; expected a decision")
            return decision

        return await step(0)

    async def _inspect(self, execution: ToolExecution, result: ToolExecutionResult) -> ToolExecutionResult:
        listeners = [listener for registry in self._chain() for listener in registry._post]
        if not listeners:
            return result

        async def step(index: int) -> PostToolDecision:
            if index == len(listeners):
                return _ACCEPT
            decision = await listeners[index](execution, result, lambda: step(index + 1))
            if not isinstance(decision, Accept | Block):
                raise TypeError(f"a post-execute listener returned {decision!r}; expected a decision")
            return decision

        decision = await step(0)
        if isinstance(decision, Block):
            return ToolExecutionResult(
                call_id=result.call_id,
                content=(_text_block(decision.feedback),),
                is_error=True,
                error=result.error,
                additional_context=decision.additional_context,
            )
        if decision.content is None and decision.additional_context is None:
            return result
        return ToolExecutionResult(
            call_id=result.call_id,
            content=result.content if decision.content is None else _content_tuple(decision.content),
            is_error=result.is_error,
            error=result.error,
            additional_context=decision.additional_context,
            meta=result.meta,
        )

    async def execute_many(
        self,
        executions: Sequence[ToolExecution],
        *,
        on_result: Callable[[ToolExecutionResult], Awaitable[None]] | None = None,
    ) -> list[ToolExecutionResult]:
        """Run a step's calls: consecutive parallel-safe calls run concurrently, every other call
        alone and in order (so a read after a write sees the write). Results are in call order;
        ``on_result`` sees each one as soon as it is ready (so a UI can close that call at once)."""
        import anyio  # the pipeline itself is framework-free; only batching needs a task group

        results: list[ToolExecutionResult | None] = [None] * len(executions)

        async def run(index: int) -> None:
            result = await self.execute(executions[index])
            results[index] = result
            if on_result is not None:
                await on_result(result)

        index = 0
        while index < len(executions):
            end = index
            while end < len(executions) and self._parallel_safe(executions[end]):
                end += 1
            if end - index > 1:
                async with anyio.create_task_group() as group:
                    for batch_index in range(index, end):
                        group.start_soon(run, batch_index)
                index = end
            else:
                await run(index)
                index += 1
        return [result for result in results if result is not None]

    def _parallel_safe(self, execution: ToolExecution) -> bool:
        definition = self.get(execution.name)
        return definition is not None and definition.parallel_safe

"""The scripted model: a JSON file plays the model, for tests, demos and golden fixtures.

File shape: ``{"turns": [[step, ...], ...]}``. The n-th prompt of a session plays turn n (slash
commands count: ``/compact`` plays its turn's first step as the summary); the k-th model call
inside it plays step k. A reloaded session continues where it was. A subagent (a ``task`` call)
plays ``"tasks": {"<the task call's id>": [step, ...]}``, its k-th model call step k, so tasks
that run at once each play their own steps.

A step may hold: ``thought`` (str), ``text`` (str or list of chunks), ``tool_calls`` (list of
``{"id", "name", "arguments"}``, arguments an object or a verbatim string), ``finish``
(``stop``/``length``/``refusal``), ``usage`` (``{"input", "output", "context_window"?}``),
``delay_ms`` and ``hang``.

A call's ``arguments`` may also be a list of strings: its verbatim text, streamed in those
pieces (``pause_ms`` apart, if the call says) the way a real model streams a call: announced by
name first, its arguments reported as they grow, the complete call at the end of the step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ._protocol import Model

if TYPE_CHECKING:
    from ._model import FinishReason, Message, ModelEvent, ModelRequest

# The model's message and event classes are imported where a turn needs them: the CLI checks a
# script file before the agent answers `initialize`, and building those dataclasses is start-up
# time the editor would wait for.

__all__ = ["ScriptError", "ScriptExhausted", "ScriptedModel"]

_STEP_KEYS = {"thought", "text", "tool_calls", "finish", "usage", "delay_ms", "hang"}
_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "refusal": "refusal"}


class ScriptError(ValueError):
    """The script file is unreadable or malformed (raised at load, with every problem)."""


class ScriptExhausted(RuntimeError):
    """The conversation went past the end of the script."""


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_duration(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _is_usage(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(key), int) for key in ("input", "output"))


# Each key a step may hold, what its value must be (absent is always fine) and what is said if not.
_STEP_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    (
        "text",
        lambda v: v is None or isinstance(v, str) or _is_strings(v),
        "must be a string or a list of strings",
    ),
    ("thought", lambda v: isinstance(v, str), "must be a string"),
    ("finish", lambda v: v in _FINISH, f"must be one of {sorted(_FINISH)}"),
    ("delay_ms", _is_duration, "must be a non-negative number"),
    ("usage", lambda v: v is None or _is_usage(v), 'must be {"input": int, "output": int}'),
)
_CALL_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    (
        "arguments",
        lambda v: isinstance(v, dict | str) or _is_strings(v),
        "must be an object, a string or a list of strings",
    ),
    ("pause_ms", _is_duration, "must be a non-negative number"),
)


def _check_keys(
    found: dict[str, Any], checks: tuple[tuple[str, Callable[[Any], bool], str], ...], where: str
) -> list[str]:
    return [
        f"{where}.{key} {message}" for key, valid, message in checks if key in found and not valid(found[key])
    ]


def _check_call(call: Any, where: str) -> list[str]:
    if not isinstance(call, dict):
        return [f"{where} must be an object"]
    problems = [
        f"{where}.{key} must be a non-empty string"
        for key in ("id", "name")
        if not isinstance(call.get(key), str) or not call.get(key)
    ]
    return problems + _check_keys(call, _CALL_CHECKS, where)


def _check_step(step: Any, where: str, problems: list[str]) -> None:
    if not isinstance(step, dict):
        problems.append(f"{where} must be an object")
        return
    unknown = sorted(set(step) - _STEP_KEYS)
    if unknown:
        problems.append(f"{where} has unknown keys {unknown}")
    problems.extend(_check_keys(step, _STEP_CHECKS, where))
    for index, call in enumerate(step.get("tool_calls") or ()):
        problems.extend(_check_call(call, f"{where}.tool_calls[{index}]"))


def _position(messages: Sequence[Message]) -> tuple[int, int]:
    from ._model import AssistantMessage, UserMessage  # after initialize: see stream

    turn = -1
    step = 0
    for message in messages:
        if isinstance(message, UserMessage):
            turn += 1
            step = 0
        elif isinstance(message, AssistantMessage):
            step += 1
    return max(turn, 0), step


_last_checked: tuple[bytes, list[Any], dict[str, Any]] | None = None
"""The last script file checked (its bytes), its turns and tasks: an agent plays one script."""


def _check_steps(steps: Any, where: str, problems: list[str]) -> None:
    if not isinstance(steps, list):
        problems.append(f"{where} must be a list of steps")
        return
    for index, step in enumerate(steps):
        _check_step(step, f"{where}[{index}]", problems)


class ScriptedModel(Model):
    """A ``Model`` that plays a script file (see the module docstring)."""

    accepts_images = True

    def __init__(self, turns: Any, *, tasks: Any = None, source: str = "<script>") -> None:
        problems: list[str] = []
        if not isinstance(turns, list):
            problems.append('"turns" must be a list of turns')
            turns = []
        for t, turn in enumerate(turns):
            _check_steps(turn, f"turns[{t}]", problems)
        if tasks is None:
            tasks = {}
        elif not isinstance(tasks, dict):
            problems.append('"tasks" must map task call ids to lists of steps')
            tasks = {}
        for task_id, steps in tasks.items():
            _check_steps(steps, f"tasks[{task_id!r}]", problems)
        if problems:
            raise ScriptError(f"script {source} is malformed: " + "; ".join(problems))
        self._adopt(turns, tasks, source)

    def _adopt(self, turns: list[Any], tasks: dict[str, Any], source: str) -> None:
        """Take checked turns: the one place a model's state is set, checked here or before."""
        self._turns = turns
        self._tasks = tasks
        self.source = source

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load and check a script file; every problem is reported in one ``ScriptError``.

        Every session builds its model, a loaded one too: the bytes are read each time (an edited
        script plays its new turns), but bytes that were checked already are not parsed and
        checked again (for a long script that was most of a short session's load). The checked
        turns are shared; nothing changes them."""
        global _last_checked
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise ScriptError(f"cannot read script {path}: {error}") from None
        if _last_checked is not None and _last_checked[0] == data:
            model = cls.__new__(cls)
            model._adopt(_last_checked[1], _last_checked[2], str(path))
            return model
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise ScriptError(f"cannot read script {path}: {error}") from None
        if not isinstance(document, dict) or "turns" not in document:
            raise ScriptError(f'script {path} must be a JSON object with a "turns" list')
        model = cls(document["turns"], tasks=document.get("tasks"), source=str(path))
        _last_checked = (data, model._turns, model._tasks)
        return model

    @property
    def name(self) -> str:
        return f"script:{self.source}"

    def _step(self, request: ModelRequest) -> Any:
        """The step that plays ``request``: its task's, else its turn's."""
        turn_index, step_index = _position(request.messages)
        turn_index = request.metadata.get("turn", turn_index)
        step_index = request.metadata.get("step", step_index)
        task = request.metadata.get("task")
        if task is not None:
            steps = self._tasks.get(task)
            if steps is None:
                raise ScriptExhausted(f"script {self.source} has no task {task!r}")
            if step_index >= len(steps):
                raise ScriptExhausted(
                    f"script {self.source} has no step {step_index + 1} in task {task!r}"
                    f" (it has {len(steps)})"
                )
            return steps[step_index]
        if turn_index >= len(self._turns):
            raise ScriptExhausted(
                f"script {self.source} has no turn {turn_index + 1} (it has {len(self._turns)})"
            )
        turn = self._turns[turn_index]
        if step_index >= len(turn):
            raise ScriptExhausted(
                f"script {self.source} has no step {step_index + 1} in turn {turn_index + 1}"
                f" (it has {len(turn)})"
            )
        return turn[step_index]

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        from ._scripted_step import step_events  # not at the top: see the note on the imports

        # The loop says where the session is (prompts so far, model calls in this prompt); a
        # bare request is placed by the shape of its conversation instead.
        return step_events(lambda: self._step(request))

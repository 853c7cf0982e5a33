"""The golden scenario format: a folder of client steps, a scripted model and a seed workspace,
read and checked before anything runs (``docs/tool-authors.md`` describes every field).

A scenario folder (``wire/<name>/``) holds:

- ``scenario.json``: ``{"description": ..., "args": [extra dsh-acp flags], "steps": [...],
  "pythonpath": [folders, relative to the scenario, where ``--tools MODULE:NAME`` modules live],
  "protocol": 2}`` (the scenario folder itself is always on the path: a ``tools.py`` beside
  ``scenario.json`` works; ``protocol`` is the ACP version the client speaks, default 1: with 2 it
  asks for the v2 draft, each prompt step waits for the turn's idle ``state_update``, and the
  golden pins, and is validated as, the v2 wire);
- ``model.json``: the scripted model (``{"turns": [...]}``, see ``dsh_acp`` ``--model script:``);
  ``{{cwd}}`` in it is the session's temp folder;
- ``workspace/`` (optional): copied into a fresh temp folder that is the session cwd;
- ``outside/`` (optional): copied beside it (``{{cwd}}/../outside``, shown as ``{{root}}/outside``);
- ``site/`` (optional): served over HTTP on 127.0.0.1 while the scenario runs, at ``{{site}}``
  (``127.0.0.1:PORT``, a free port; the golden shows ``{{site}}``), for tools that fetch pages;
- ``expected.jsonl``: the golden — every line the agent wrote, normalized (see ``Normalizer``);
  ``pytest --update-golden`` writes it.

Steps (one key each; strings may use ``{{cwd}}``, ``{{site}}``, ``{{sessionId}}``/``{{sessionId2}}``…, and
``{{python}}`` / ``{{scenario}}`` — this interpreter and the scenario folder, to start an MCP
server that lives beside the scenario; those two never reach the golden unless the agent echoes
them):
``{"initialize": {"clientCapabilities": {...}, "protocolVersion": 1}}`` (v2's: ``{"capabilities":
{...}}``),
``{"new_session": {"additionalDirectories": [...]}}``,
``{"prompt": {"text": "..." | "blocks": [...], "session": 1, "permissions": ["allow_once", ...],
"elicitations": [{"action": "accept", "content": {...}}, ...], "cancel_after": N,
"wait": false}}`` (a permission answer is an option id, or ``"kind:allow_always"``: what a client
that lists options by kind picks, or ``"cancelled"``, or ``"error"``; what ``elicitation/create``
answers, in order; cancel once N updates of the turn arrived; with ``"wait": false`` the next
step follows as soon as the prompt is sent, and ``{"wait": {}}`` waits for every prompt still
unanswered),
``{"cancel": {"session": 1}}`` (``session/cancel``),
``{"files": {"path": "text"}}`` (the editor's buffers for ``fs/*``),
``{"request": {"method": ..., "params": ...}}`` (a ``session/fork``'s new session is the next
``{{sessionIdN}}``), ``{"notify": {...}}``, ``{"raw": "a line"}``,
``{"restart": {}}`` (a new agent process over the same state; the transcript continues).

A folder that cannot be read is not skipped: ``discover_scenarios`` returns it with its
``problems``, and running it fails with them, so a misspelled step is a failing test that names
it rather than a scenario that quietly vanished.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Scenario", "ScenarioError", "discover_scenarios", "scenario_problems"]

REQUIRED_FILES = ("scenario.json", "model.json")
_FIELDS = {"description", "args", "steps", "pythonpath", "protocol"}

_Check = Callable[[Any], str | None]
"""Says what is wrong with a field's value, or ``None``."""


def _of(kind: type | tuple[type, ...], what: str) -> _Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
        return None if ok else f"must be {what}, not {type(value).__name__} {_brief(value)}"

    return check


def _strings(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return None
    return f"must be a list of strings, not {_brief(value)}"


def _count(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return None
    return f"must be a whole number from 1, not {_brief(value)}"


def _objects(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return None
    return f"must be a list of objects, not {_brief(value)}"


_ANY: dict[str, _Check] | None = None
"""A step whose body is passed on as ACP params: any object."""

_STEPS: dict[str, dict[str, _Check] | None] = {
    "initialize": _ANY,
    "new_session": _ANY,
    "prompt": {
        "text": _of(str, "a string"),
        "blocks": _objects,
        "session": _count,
        "permissions": _strings,
        "elicitations": _objects,
        "cancel_after": _count,
        "wait": _of(bool, "true or false"),
    },
    "cancel": {"session": _count},
    "files": _ANY,
    "request": {"method": _of(str, "a method name"), "params": lambda value: None},
    "notify": {"method": _of(str, "a method name"), "params": lambda value: None},
    "raw": _ANY,
    "restart": {},
    "wait": {},
}
_REQUIRED_FIELDS = {"request": ("method",), "notify": ("method",)}


def _brief(value: Any) -> str:
    shown = orjson.dumps(value, default=repr).decode()
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _guess(word: str, known: Any) -> str:
    close = difflib.get_close_matches(word, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _step_problems(index: int, step: Any) -> list[str]:
    where = f"step {index}"
    if not isinstance(step, dict) or len(step) != 1:
        return [f"{where} must be an object with one key, the step's kind ({', '.join(sorted(_STEPS))})"]
    ((kind, body),) = step.items()
    if kind not in _STEPS:
        return [
            f"{where}: unknown step {kind!r}{_guess(kind, _STEPS)}; steps are {', '.join(sorted(_STEPS))}"
        ]
    where = f"{where} ({kind})"
    if kind == "raw":
        return [] if isinstance(body, str) else [f"{where} must be a string: the line to send"]
    if not isinstance(body, dict):
        return [f"{where} must be an object, not {_brief(body)}"]
    fields = _STEPS[kind]
    if fields is None:
        if kind == "files" and not all(isinstance(text, str) for text in body.values()):
            return [f"{where} maps each path to its text (a string)"]
        return []
    return _field_problems(where, kind, body, fields)


def _field_problems(where: str, kind: str, body: dict[str, Any], fields: dict[str, _Check]) -> list[str]:
    """What is wrong with a step's fields: one missing, unknown, or of the wrong shape."""
    problems = [f"{where}: missing {name!r}" for name in _REQUIRED_FIELDS.get(kind, ()) if name not in body]
    for name, value in body.items():
        check = fields.get(name)
        if check is None:
            known = f"; it takes {', '.join(sorted(fields))}" if fields else "; it takes none"
            problems.append(f"{where}: unknown field {name!r}{_guess(name, fields)}{known}")
        elif (problem := check(value)) is not None:
            problems.append(f"{where}: {name} {problem}")
    return problems


def _document_problems(document: Any) -> list[str]:
    if not isinstance(document, dict):
        return ["scenario.json must hold an object"]
    problems = [
        f"scenario.json: unknown field {name!r}{_guess(name, _FIELDS)}"
        for name in document
        if name not in _FIELDS
    ]
    description = document.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("scenario.json needs a description (what a user would notice)")
    for name in ("args", "pythonpath"):
        if name in document and (problem := _strings(document[name])) is not None:
            problems.append(f"scenario.json: {name} {problem}")
    if document.get("protocol", 1) not in (1, 2) or isinstance(document.get("protocol"), bool):
        problems.append('scenario.json: "protocol" is the ACP version the client speaks: 1 or 2')
    steps = document.get("steps")
    if not isinstance(steps, list) or not steps:
        problems.append("scenario.json needs a non-empty list of steps")
        return problems
    for index, step in enumerate(steps, start=1):
        problems.extend(_step_problems(index, step))
    return problems


class ScenarioError(ValueError):
    """A scenario folder is incomplete or its steps are malformed; the message names each problem."""


@dataclass(frozen=True)
class Scenario:
    """One golden wire scenario (see the module docstring for the folder layout)."""

    folder: Path
    description: str
    steps: tuple[dict[str, Any], ...]
    args: tuple[str, ...] = ()
    pythonpath: tuple[str, ...] = ()
    """Extra import folders for ``--tools`` modules, relative to the scenario folder."""
    protocol: int = 1
    """The ACP version the scenario's client speaks (``"protocol": 2``: the v2 draft): what its
    ``initialize`` steps ask for unless they name a ``protocolVersion``."""
    problems: tuple[str, ...] = ()
    """Why the folder cannot be played (a scenario ``discover_scenarios`` found broken): running
    it raises ``ScenarioError`` with them."""

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def golden_path(self) -> Path:
        return self.folder / "expected.jsonl"

    def __str__(self) -> str:
        return self.name

    def check(self) -> None:
        """Raise ``ScenarioError`` naming every problem, if it has any."""
        if self.problems:
            raise ScenarioError(f"scenario {self.name} cannot be read: " + "; ".join(self.problems))

    @classmethod
    def read(cls, folder: str | Path) -> Scenario:
        """Read a scenario folder; a folder with problems is returned with them (see ``check``)."""
        folder = Path(folder)
        problems = [f"missing {name}" for name in REQUIRED_FILES if not (folder / name).is_file()]
        document: Any = {}
        if (folder / "scenario.json").is_file():
            try:
                document = orjson.loads((folder / "scenario.json").read_bytes())
            except orjson.JSONDecodeError as error:
                problems.append(f"scenario.json is not JSON: {error}")
            else:
                problems.extend(_document_problems(document))
        if problems or not isinstance(document, Mapping):
            return cls(folder, "", (), problems=tuple(problems))
        return cls(
            folder,
            document["description"],
            tuple(document["steps"]),
            tuple(document.get("args", ())),
            tuple(document.get("pythonpath", ())),
            document.get("protocol", 1),
        )

    @classmethod
    def load(cls, folder: str | Path) -> Scenario:
        """Read a scenario folder; ``ScenarioError`` names every problem."""
        scenario = cls.read(folder)
        scenario.check()
        return scenario


def _scenario_folders(root: Path) -> list[Path]:
    """The scenario folders of ``root``: every folder in it but hidden ones (``.x``), ``_x`` ones
    (``__pycache__``) and Python packages (a tools package kept beside the scenarios)."""
    return sorted(
        path
        for path in root.iterdir()
        if path.is_dir() and not path.name.startswith((".", "_")) and not (path / "__init__.py").exists()
    )


def discover_scenarios(root: str | Path) -> list[Scenario]:
    """Every scenario under ``root``, by name, broken ones included (they fail when run, naming
    their problems); ``ScenarioError`` when ``root`` is missing or holds no scenario."""
    root = Path(root)
    if not root.is_dir():
        raise ScenarioError(f"no scenario folder at {root}")
    folders = _scenario_folders(root)
    if not folders:
        raise ScenarioError(f"{root} holds no scenario (a folder with scenario.json and model.json)")
    return [Scenario.read(folder) for folder in folders]


def scenario_problems(root: str | Path) -> list[str]:
    """Everything wrong with a scenario tree: folders that cannot be read, scenarios without a
    golden, goldens with no scenario."""
    root = Path(root)
    problems = []
    for folder in _scenario_folders(root):
        scenario = Scenario.read(folder)
        if scenario.problems:
            problems.append(f"scenario {scenario.name}: " + "; ".join(scenario.problems))
        elif not scenario.golden_path.is_file():
            problems.append(f"scenario {scenario.name}: missing expected.jsonl")
    for golden in root.rglob("expected.jsonl"):
        if golden.parent.parent != root:
            problems.append(f"orphan golden {golden.relative_to(root)}: not in a scenario folder of {root}")
    return problems

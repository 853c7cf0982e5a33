"""Golden wire scenarios: a folder of client steps, a scripted model and a seed workspace, and
the agent's normalized stdout they must produce.

A scenario folder ``fixtures/wire/<name>/`` holds:

- ``scenario.json``: ``{"description": ..., "args": [extra dsh-acp flags], "steps": [...],
  "pythonpath": [folders, relative to the scenario, where ``--tools MODULE:NAME`` modules live]}``
  (the scenario folder itself is always on the path: a ``tools.py`` beside ``scenario.json`` works);
- ``model.json``: the scripted model (``{"turns": [...]}``, see ``dsh_acp`` ``--model script:``);
  ``{{cwd}}`` in it is the session's temp folder;
- ``workspace/`` (optional): copied into a fresh temp folder that is the session cwd;
- ``outside/`` (optional): copied beside it (``{{cwd}}/../outside``, shown as ``{{root}}/outside``);
- ``site/`` (optional): served over HTTP on 127.0.0.1 while the scenario runs, at ``{{site}}``
  (``127.0.0.1:PORT``, a free port; the golden shows ``{{site}}``), for tools that fetch pages;
- ``expected.jsonl``: the golden — every line the agent wrote, normalized (see ``Normalizer``).

Steps (one key each; strings may use ``{{cwd}}``, ``{{site}}``, ``{{sessionId}}``/``{{sessionId2}}``…, and
``{{python}}`` / ``{{scenario}}`` — this interpreter and the scenario folder, to start an MCP
server that lives beside the scenario; those two never reach the golden unless the agent echoes
them):
``{"initialize": {"clientCapabilities": {...}, "protocolVersion": 1}}``,
``{"new_session": {"additionalDirectories": [...]}}``,
``{"prompt": {"text": "..." | "blocks": [...], "session": 1, "permissions": ["allow_once", ...],
"elicitations": [{"action": "accept", "content": {...}}, ...], "cancel_after": N,
"wait": false}}`` (a permission answer is an option id, or ``"kind:allow_always"``: what a client
that lists options by kind picks; what ``elicitation/create`` answers, in order; cancel once N updates of the
turn arrived; with ``"wait": false`` the next step follows as soon as the prompt is sent, and
``{"wait": {}}`` waits for every prompt still unanswered),
``{"files": {"path": "text"}}`` (the editor's buffers for ``fs/*``),
``{"request": {"method": ..., "params": ...}}`` (a ``session/fork``'s new session is the next
``{{sessionIdN}}``), ``{"notify": {...}}``, ``{"raw": "a line"}``,
``{"restart": {}}`` (a new agent process over the same state; the transcript continues).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import orjson
from anyio.abc import TaskGroup

from dsh_acp.rpc._errors import RpcError

from ._checks import wire_problems
from ._client import AcpClient
from ._golden import Normalizer, golden_diff
from ._schema import AcpSchema
from ._site import serve_site

__all__ = [
    "Mode",
    "Scenario",
    "ScenarioError",
    "check_scenario",
    "discover_scenarios",
    "run_scenario",
    "scenario_problems",
]

Mode = Literal["subprocess", "memory"]
REQUIRED_FILES = ("scenario.json", "model.json", "expected.jsonl")
_STEP_KINDS = {
    "initialize",
    "new_session",
    "prompt",
    "files",
    "request",
    "notify",
    "raw",
    "restart",
    "cancel",
    "wait",
}


class ScenarioError(ValueError):
    """A scenario folder is incomplete or its steps are malformed."""


@dataclass(frozen=True)
class Scenario:
    """One golden wire scenario (see the module docstring for the folder layout)."""

    folder: Path
    description: str
    steps: tuple[dict[str, Any], ...]
    args: tuple[str, ...] = ()
    pythonpath: tuple[str, ...] = ()
    """Extra import folders for ``--tools`` modules, relative to the scenario folder."""

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def golden_path(self) -> Path:
        return self.folder / "expected.jsonl"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def load(cls, folder: str | Path) -> Scenario:
        """Read a scenario folder; ``ScenarioError`` names every problem."""
        folder = Path(folder)
        problems = [f"missing {name}" for name in REQUIRED_FILES if not (folder / name).is_file()]
        document: dict[str, Any] = {}
        if (folder / "scenario.json").is_file():
            try:
                document = orjson.loads((folder / "scenario.json").read_bytes())
            except orjson.JSONDecodeError as error:
                problems.append(f"scenario.json is not JSON: {error}")
        steps = document.get("steps", [])
        if not isinstance(steps, list) or not steps:
            problems.append("scenario.json needs a non-empty list of steps")
            steps = []
        for index, step in enumerate(steps):
            if not isinstance(step, dict) or len(step) != 1 or next(iter(step)) not in _STEP_KINDS:
                problems.append(f"step {index + 1} must be one of {sorted(_STEP_KINDS)} (one key)")
        if not isinstance(document.get("description", ""), str) or not document.get("description"):
            problems.append("scenario.json needs a description (what a user would notice)")
        if problems:
            raise ScenarioError(f"scenario {folder.name}: " + "; ".join(problems))
        return cls(
            folder,
            document["description"],
            tuple(steps),
            tuple(document.get("args", ())),
            tuple(document.get("pythonpath", ())),
        )


def scenario_problems(root: str | Path) -> list[str]:
    """Everything wrong with a scenario tree: folders missing files, goldens with no scenario."""
    root = Path(root)
    problems = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            Scenario.load(folder)
        except ScenarioError as error:
            problems.append(str(error))
    for golden in root.rglob("expected.jsonl"):
        if golden.parent.parent != root:
            problems.append(f"orphan golden {golden.relative_to(root)}: not in a scenario folder of {root}")
    return problems


def discover_scenarios(root: str | Path) -> list[Scenario]:
    """Every complete scenario under ``root``, by name (incomplete ones are ``scenario_problems``)."""
    root = Path(root)
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            found.append(Scenario.load(folder))
        except ScenarioError:
            continue
    return found


@dataclass
class _Run:
    scenario: Scenario
    schema: AcpSchema | None
    mode: Mode
    root: Path
    cwd: Path
    sessions: list[str] = field(default_factory=list)
    lines: list[Any] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    """Agent processes started so far (a ``restart`` step starts another)."""
    unanswered: TaskGroup | None = None
    """Where prompts sent with ``"wait": false`` await their answers."""
    outstanding: int = 0
    """Prompts sent with ``"wait": false`` and not answered yet."""
    answered: anyio.Event = field(default_factory=anyio.Event)
    """Set while no prompt sent with ``"wait": false`` is unanswered."""
    site: str | None = None
    """``host:port`` of the scenario's ``site/`` while it is served."""

    def __post_init__(self) -> None:
        self.answered.set()

    def expand(self, value: Any) -> Any:
        if isinstance(value, str):
            value = value.replace("{{cwd}}", str(self.cwd))
            if self.site is not None:
                value = value.replace("{{site}}", self.site)
            value = value.replace("{{python}}", sys.executable)
            value = value.replace("{{scenario}}", str(self.scenario.folder.resolve()))
            for index in range(len(self.sessions), 0, -1):
                name = "{{sessionId}}" if index == 1 else f"{{{{sessionId{index}}}}}"
                value = value.replace(name, self.sessions[index - 1])
            return value
        if isinstance(value, list):
            return [self.expand(item) for item in value]
        if isinstance(value, dict):
            return {self.expand(key): self.expand(item) for key, item in value.items()}
        return value

    def agent_args(self) -> list[str]:
        # The script may name files in the session's folder: ``{{cwd}}`` is the temp workspace.
        model = self.root / "model.json"
        if not model.exists():
            script = (self.scenario.folder / "model.json").read_text(encoding="utf-8")
            script = script.replace("{{cwd}}", str(self.cwd))
            if self.site is not None:
                script = script.replace("{{site}}", self.site)
            model.write_text(script, encoding="utf-8")
        state = self.root / "state"  # outlives a {"restart": {}} step, like a user's state dir
        # Each restart counts its ids afresh; a prefix keeps them from repeating the first run's.
        prefix = ["--id-prefix", f"run{self.runs}-"] if self.runs > 1 else []
        return [
            "--deterministic",
            *prefix,
            "--state-dir",
            str(state),
            "--model",
            f"script:{model}",
            *self.scenario.args,
        ]

    def python_path(self) -> list[str]:
        """Where a scenario's own tool modules are found: its folder, and its ``pythonpath``."""
        folder = self.scenario.folder
        return [str(folder), *(str((folder / extra).resolve()) for extra in self.scenario.pythonpath)]

    @asynccontextmanager
    async def agent(self) -> AsyncIterator[AcpClient]:
        self.runs += 1
        paths = self.python_path()
        if self.mode == "memory":
            from dsh_acp.launch._flags import build_config

            sys.path[:0] = paths  # a scenario's own tools module (``--tools tools:TOOLS``)
            _forget_modules(paths)  # another scenario's module of the same name must not answer
            try:
                config = build_config(self.agent_args())
                async with AcpClient.in_memory(config, schema=self.schema, files=self.files) as client:
                    yield client
            finally:
                for path in paths:
                    sys.path.remove(path)
                _forget_modules(paths)
        else:
            path = os.pathsep.join(filter(None, [*paths, os.environ.get("PYTHONPATH")]))
            async with AcpClient.subprocess(
                self.agent_args(),
                schema=self.schema,
                env={"PYTHONPATH": path},
                cwd=str(self.root),
                files=self.files,
            ) as client:
                yield client


async def _prompt(run: _Run, client: AcpClient, body: dict[str, Any]) -> None:
    session = run.sessions[int(body.get("session", len(run.sessions))) - 1]
    blocks = body.get("blocks") or [{"type": "text", "text": body.get("text", "")}]
    client.permission_answers.extend(body.get("permissions", ()))
    client.elicitation_answers.extend(body.get("elicitations", ()))
    cancel_after = body.get("cancel_after")
    params = {"sessionId": session, "prompt": run.expand(blocks)}
    if body.get("wait") is False:
        assert run.unanswered is not None
        sent = _client_requests(client)
        run.unanswered.start_soon(_unanswered, run, client, params)
        # The next step's message must follow this one on the wire.
        await client.wait_until(lambda: _client_requests(client) > sent)
        return
    if cancel_after is None:
        await _request(client, "session/prompt", params)
        return
    before = len(client.updates(session))
    async with anyio.create_task_group() as group:
        group.start_soon(_request, client, "session/prompt", params)
        await client.wait_for(lambda _: len(client.updates(session)) - before >= cancel_after)
        await client.cancel(session)


async def _unanswered(run: _Run, client: AcpClient, params: Any) -> None:
    run.outstanding += 1
    if run.answered.is_set():
        run.answered = anyio.Event()
    try:
        await _request(client, "session/prompt", params)
    finally:
        run.outstanding -= 1
        if not run.outstanding:
            run.answered.set()


def _client_requests(client: AcpClient) -> int:
    return sum(
        1
        for line in client.lines
        if line.direction == "client" and isinstance(line.message, dict) and "id" in line.message
    )


async def _request(client: AcpClient, method: str, params: Any) -> Any:
    try:
        return await client.request(method, params)
    except RpcError:
        return None  # the error response is in the transcript, which is what is pinned


async def _run_steps(run: _Run, client: AcpClient, steps: Sequence[dict[str, Any]]) -> None:
    async with anyio.create_task_group() as unanswered:
        run.unanswered = unanswered
        await _play(run, client, steps)
    run.unanswered = None


async def _play(run: _Run, client: AcpClient, steps: Sequence[dict[str, Any]]) -> None:
    for step in steps:
        ((kind, body),) = step.items()
        body = run.expand(body) if kind != "prompt" else body
        if kind == "initialize":
            params = {"protocolVersion": 1, "clientCapabilities": {}, **body}
            await _request(client, "initialize", params)
        elif kind == "new_session":
            result = await _request(client, "session/new", {"cwd": str(run.cwd), "mcpServers": [], **body})
            if result is not None:
                run.sessions.append(result["sessionId"])
        elif kind == "prompt":
            await _prompt(run, client, body)
        elif kind == "cancel":
            await client.cancel(run.sessions[int(body.get("session", len(run.sessions))) - 1])
        elif kind == "files":
            run.files.update(body)
        elif kind == "request":
            result = await _request(client, body["method"], body.get("params"))
            if body["method"] == "session/fork" and isinstance(result, dict):
                run.sessions.append(result["sessionId"])  # the fork is the next {{sessionIdN}}
        elif kind == "notify":
            await client.notify(body["method"], body.get("params"))
        elif kind == "raw":
            await client.send_raw(body.encode() + b"\n")
        elif kind == "wait":
            with anyio.fail_after(30):
                await run.answered.wait()


def _forget_modules(paths: Sequence[str]) -> None:
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if any(file.startswith(path + os.sep) for path in paths):
            del sys.modules[name]


@contextmanager
def _workspace(scenario: Scenario) -> Iterator[tuple[Path, Path]]:
    root = Path(tempfile.mkdtemp(prefix=f"dsh-wire-{scenario.name}-"))
    try:
        cwd = root / "workspace"
        seed = scenario.folder / "workspace"
        if seed.is_dir():
            shutil.copytree(seed, cwd, symlinks=True)
        else:
            cwd.mkdir()
        if (scenario.folder / "outside").is_dir():
            shutil.copytree(scenario.folder / "outside", root / "outside", symlinks=True)
        yield root, cwd
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def run_scenario(
    scenario: Scenario, *, mode: Mode = "subprocess", schema: AcpSchema | None = None
) -> list[str]:
    """Play a scenario against a fresh agent and return its normalized stdout, one line per message.

    Every agent message is validated against its definition in the official schema (when
    ``schema`` is given): a violation fails the run.
    """
    with _workspace(scenario) as (root, cwd), serve_site(scenario.folder / "site") as site:
        run = _Run(scenario, schema, mode, root, cwd, site=site)
        segments: list[list[dict[str, Any]]] = [[]]
        for step in scenario.steps:
            if "restart" in step:
                segments.append([])
            else:
                segments[-1].append(step)
        normalizer = Normalizer([str(cwd), str(cwd.resolve())], [str(root), str(root.resolve())], site=site)
        golden: list[str] = []
        for segment in segments:
            with anyio.fail_after(60):
                async with run.agent() as client:
                    await _run_steps(run, client, segment)
            client.assert_valid()
            for session in run.sessions:
                normalizer.add_session(session)
            for line in client.lines:
                if line.direction == "client":
                    if isinstance(line.message, dict) and "method" in line.message and "id" in line.message:
                        normalizer.client_id(line.message["id"])
                else:
                    golden.append(normalizer.line(line.message))
        return golden


def check_scenario(
    scenario: Scenario, *, update: bool = False, mode: Mode = "subprocess", schema: AcpSchema | None = None
) -> str | None:
    """Run a scenario and compare it with its golden.

    Raises ``AssertionError`` with a readable diff when they differ. With ``update=True`` the
    golden is rewritten instead and the diff of what changed is returned (``None`` if nothing did).
    """
    actual = anyio.run(lambda: run_scenario(scenario, mode=mode, schema=schema))
    expected = (
        scenario.golden_path.read_text(encoding="utf-8").splitlines() if scenario.golden_path.exists() else []
    )
    if not update:  # a golden that pins what real clients reject is wrong even if the run matches
        stale = [p for line in expected for p in wire_problems(orjson.loads(line))]
        if stale:
            rules = "\n".join(stale)
            raise AssertionError(f"the golden of scenario {scenario.name} breaks client rules:\n{rules}")
    if actual == expected:
        return None
    diff = golden_diff(expected, actual, scenario.name)
    if update:
        scenario.golden_path.write_text("".join(line + "\n" for line in actual), encoding="utf-8")
        return diff
    raise AssertionError(f"the wire output of scenario {scenario.name} changed:\n{diff}")

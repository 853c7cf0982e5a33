"""Golden wire scenarios, played: a fresh agent (a real ``dsh-acp`` process, or one in this
process) driven through a scenario's steps, its stdout normalized and compared with the golden.

The format and its checks are ``_scenario_format``. A run fails in words, never as a skip or a
buried traceback: a scenario that cannot be read names its problems, a missing golden says how
to write one, an agent that would not start (a ``--tools`` module that does not import) says
what it printed, and a golden that differs shows the changed messages field by field.

In memory, a scenario's own modules (``--tools tools:TOOLS`` beside it, or in its
``pythonpath``) are imported for its run and forgotten after it: only the modules named by the
files directly in those folders, so an author's virtualenv lying under one of them (``../..``
the project, ``.venv`` inside) keeps its anyio and pytest.
"""

from __future__ import annotations

import contextlib
import importlib
import io
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

from dsh_acp.launch._flags import build_config
from dsh_acp.rpc._errors import RpcError

from ._checks import wire_problems
from ._client import AcpClient
from ._golden import Normalizer
from ._golden_diff import golden_diff
from ._scenario_format import Scenario, ScenarioError, discover_scenarios, scenario_problems
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
_KIT_PACKAGES = frozenset({"dsh_acp", "dsh_tools", "reference_tools"})
"""Never a scenario's own module: the kit runs on them."""


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
            # Whether a machine has the OS sandbox is not the scenario's: off, unless its own
            # args turn it on (the last --sandbox wins) to pin what the sandbox does.
            "--sandbox",
            "off",
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
            with _scenario_modules(paths):
                config = _memory_config(self.agent_args())
                async with AcpClient.in_memory(config, schema=self.schema, files=self.files) as client:
                    yield client
        else:
            path = os.pathsep.join(filter(None, [*paths, os.environ.get("PYTHONPATH")]))
            async with AcpClient.subprocess(
                self.agent_args(),
                schema=self.schema,
                env={"PYTHONPATH": path},
                cwd=str(self.root),
                files=self.files,
                capture_stderr=True,
            ) as client:
                yield client


def _memory_config(args: list[str]) -> Any:
    """The agent's configuration from its flags, as the command reads them: flags it refuses
    (a ``--tools`` module that does not import) are a ``ScenarioError`` with its words."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return build_config(args)
    except SystemExit as exit:
        words = " ".join(said.getvalue().split())
        raise ScenarioError(f"the agent would not start (exit status {exit.code}): {words}") from None


def _provided_names(paths: Sequence[str]) -> set[str]:
    """The top-level modules the files directly in ``paths`` provide (``tools.py``, ``pkg/``)."""
    names = set()
    for path in paths:
        try:
            entries = os.listdir(path)
        except OSError:
            continue
        for entry in entries:
            name, extension = os.path.splitext(entry)
            module = extension == ".py" or (not extension and os.path.isdir(os.path.join(path, entry)))
            if module and name.isidentifier() and name not in _KIT_PACKAGES:
                names.add(name)
    return names


def _from(module: Any, paths: Sequence[str]) -> bool:
    file = getattr(module, "__file__", None) or ""
    return any(file.startswith(path + os.sep) for path in paths)


@contextmanager
def _scenario_modules(paths: list[str]) -> Iterator[None]:
    """``paths`` first on the import path while a scenario runs in memory; a module of the same
    name loaded from elsewhere (another scenario's ``tools``) set aside, and what the run
    imported of those names forgotten after it (see the module)."""
    names = _provided_names(paths)

    def ours(name: str) -> bool:
        return name.partition(".")[0] in names

    aside = {name: module for name, module in sys.modules.items() if ours(name) and not _from(module, paths)}
    for name in aside:
        del sys.modules[name]
    before = set(sys.modules)
    sys.path[:0] = paths
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for path in paths:
            sys.path.remove(path)
        for name in set(sys.modules) - before:
            if ours(name):
                del sys.modules[name]
        sys.modules.update(aside)


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
        await _turn(client, params)
        return
    before = len(client.updates(session))
    async with anyio.create_task_group() as group:
        group.start_soon(_turn, client, params)
        await client.wait_for(lambda _: len(client.updates(session)) - before >= cancel_after)
        await client.cancel(session)


async def _unanswered(run: _Run, client: AcpClient, params: Any) -> None:
    run.outstanding += 1
    if run.answered.is_set():
        run.answered = anyio.Event()
    try:
        await _turn(client, params)
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


async def _turn(client: AcpClient, params: dict[str, Any]) -> None:
    """A prompt to its turn's end: its answer (v1), or the ``state_update`` that says the session
    went idle after its answer (v2, where the answer only says the prompt was accepted)."""
    result = await _request(client, "session/prompt", params)
    if client.protocol >= 2 and result is not None:
        session = params["sessionId"]
        await client.wait_until(lambda: client.turn_end(session, result) is not None, 30)


def _initialize_params(body: dict[str, Any], protocol: int) -> dict[str, Any]:
    """The step's ``initialize`` params, with what a client always sends: v1's, or those of the
    version asked for (v2 names the client ``info`` and its ``capabilities``)."""
    version = body.get("protocolVersion", protocol)
    if isinstance(version, int) and version >= 2:
        info = {"name": "dsh-acp-scenario", "version": "1"}
        return {"protocolVersion": version, "info": info, "capabilities": {}, **body}
    return {"protocolVersion": 1, "clientCapabilities": {}, **body}


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
            await _request(client, "initialize", _initialize_params(body, run.scenario.protocol))
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
    scenario: Scenario, *, mode: Mode = "subprocess", schema: AcpSchema | None = None, pin_agent: bool = False
) -> list[str]:
    """Play a scenario against a fresh agent and return its normalized stdout, one line per message.

    Every agent message is validated against its definition in the official schema (when
    ``schema`` is given): a violation fails the run. ``pin_agent`` keeps what describes the
    agent itself (its version, capabilities, modes and commands; see ``Normalizer``).
    A scenario that cannot be read, or an agent that stops before the scenario ends, raises
    ``ScenarioError`` saying why.
    """
    scenario.check()
    with _workspace(scenario) as (root, cwd), serve_site(scenario.folder / "site") as site:
        run = _Run(scenario, schema, mode, root, cwd, site=site)
        segments: list[list[dict[str, Any]]] = [[]]
        for step in scenario.steps:
            if "restart" in step:
                segments.append([])
            else:
                segments[-1].append(step)
        normalizer = Normalizer(
            [str(cwd), str(cwd.resolve())], [str(root), str(root.resolve())], site=site, pin_agent=pin_agent
        )
        golden: list[str] = []
        for segment in segments:
            client = await _play_segment(run, segment)
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


async def _play_segment(run: _Run, segment: Sequence[dict[str, Any]]) -> AcpClient:
    """One agent's part of the scenario (up to a ``restart``); an agent that dies in it is a
    ``ScenarioError`` with its exit status and its last words on stderr."""
    client: AcpClient | None = None
    try:
        with anyio.fail_after(60):
            async with run.agent() as client:
                await _run_steps(run, client, segment)
    except ScenarioError:
        raise
    except Exception as error:
        if client is None or client.process is None or client.process.returncode is None:
            raise
        said = "\n".join(f"  {line}" for line in client.stderr_lines)
        raise ScenarioError(
            f"scenario {run.scenario.name}: the agent exited with status {client.process.returncode} "
            f"before the scenario ended" + (f"; its last words on stderr:\n{said}" if said else "")
        ) from error
    return client


def check_scenario(
    scenario: Scenario,
    *,
    update: bool = False,
    mode: Mode = "subprocess",
    schema: AcpSchema | None = None,
    pin_agent: bool = False,
) -> str | None:
    """Run a scenario and compare it with its golden.

    Raises ``AssertionError`` with the changed messages, field by field, when they differ (or
    when there is no golden yet). With ``update=True`` the golden is written instead and the diff
    of what changed is returned (``None`` if nothing did). ``pin_agent``: see ``run_scenario``.
    """
    actual = anyio.run(lambda: run_scenario(scenario, mode=mode, schema=schema, pin_agent=pin_agent))
    if not scenario.golden_path.exists() and not update:
        raise AssertionError(
            f"scenario {scenario.name} has no golden yet ({scenario.golden_path}): run pytest "
            "--update-golden, read what it prints, and commit the file"
        )
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

"""The agent's configuration: what the CLI (or a test, or the golden kit) decides.

Kept free of heavy imports: it is built before ``initialize`` is answered.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_acp._coalesce_policy import CoalescePolicy
from dsh_acp._version import VERSION
from dsh_acp.models._protocol import checked_model
from dsh_acp.rpc._framing import DEFAULT_MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from dsh_acp.models._protocol import Model
    from dsh_acp.models._source import ModelSource
    from dsh_tools import ToolDefinition, ToolRegistry

__all__ = [
    "FIXED_TIME",
    "MAX_MODEL_REQUESTS",
    "MAX_TASK_REQUESTS",
    "VERSION",
    "AgentConfig",
    "ModelChoice",
    "counter_ids",
    "default_state_dir",
    "random_ids",
    "utc_now",
]

MAX_MODEL_REQUESTS = 50
"""How many model requests one prompt turn may make before it stops (``max_turn_requests``)."""
MAX_TASK_REQUESTS = 25
"""How many model requests a subagent (one ``task`` call) may make before it stops without an
answer; they count apart from its turn's."""
_COALESCE = CoalescePolicy()
"""The default coalescing of a running tool's output (its owner's defaults)."""

FIXED_TIME = "2026-01-01T00:00:00Z"
"""The clock of ``--deterministic`` runs."""


def utc_now() -> str:
    """The current time as ISO 8601 UTC (the session log's timestamps), with microseconds.
    The ``time`` module, not ``datetime``: the agent would import ``datetime`` for this alone,
    before it answers ``initialize``."""
    seconds, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{nanoseconds // 1000:06d}Z"


def default_state_dir(environ: dict[str, str] | None = None) -> Path:
    """``$DSH_STATE_DIR``, else ``$XDG_STATE_HOME/dsh-acp``, else ``~/.local/state/dsh-acp``."""
    env = os.environ if environ is None else environ
    if env.get("DSH_STATE_DIR"):
        return Path(env["DSH_STATE_DIR"])
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dsh-acp"


def random_ids() -> Callable[[], str]:
    """Fresh random ids (the default)."""
    return lambda: uuid.uuid4().hex


def counter_ids(prefix: str) -> Callable[[], str]:
    """Deterministic ids ``prefix1``, ``prefix2``… (tests and golden fixtures)."""
    count = 0

    def next_id() -> str:
        nonlocal count
        count += 1
        return f"{prefix}{count}"

    return next_id


@dataclass(frozen=True)
class ModelChoice:
    """A model the user can pick (the session's model picker lists them)."""

    id: str
    name: str
    build: Callable[[], Model]
    """Builds one instance per session."""
    accepts_images: bool = False
    description: str | None = None
    efforts: tuple[str, ...] = ()
    """The reasoning efforts the model takes (the effort picker; empty: no picker)."""

    def new_model(self) -> Model:
        """A model for a new session, checked to be one."""
        return checked_model(self.build(), self.id)


@dataclass
class AgentConfig:
    """Everything that varies between runs is here, so tests can pin it."""

    model_source: ModelSource | None = None
    """Where an OpenAI-compatible model's settings come from (enables the ``api-key`` auth method)."""
    models: list[ModelChoice] = field(default_factory=list)
    find_models: Callable[[], list[ModelChoice]] | None = None
    """Where models come from when none was configured at start-up: asked again (``authenticate``,
    ``session/new``) while ``models`` is empty, so a model ``dsh-acp login`` stores since needs no
    restart."""
    """The models to pick from, the default first; empty serves without a model (prompts then
    explain how to configure one)."""
    tools: Callable[[], Sequence[ToolDefinition]] | None = None
    """The process-wide tools, built on first use (not on the path to ``initialize``)."""
    configure_registry: Callable[[ToolRegistry], None] | None = None
    """Installs process-wide pipeline listeners (policies) once the tools are registered."""
    session_ids: Callable[[], str] = field(default_factory=random_ids)
    message_ids: Callable[[], str] = field(default_factory=random_ids)
    max_model_requests: int = MAX_MODEL_REQUESTS
    max_task_requests: int = MAX_TASK_REQUESTS
    coalesce_bytes: int = _COALESCE.max_bytes
    coalesce_delay: float | None = _COALESCE.max_delay
    force_local_fs: bool = False
    ask_user: Callable[[], ToolDefinition] | None = None
    """Builds the tool that asks the user questions (the CLI's: the reference ``ask_user``), for
    sessions whose client can ask (``elicitation.form``); it finds their ``UserQuestions``."""
    instruction_files: tuple[str, ...] = ("AGENTS.md",)
    """File names of project instructions, read from the session folder up to the repository root."""
    terminals: str = "auto"
    """Where ``bash`` runs: ``auto`` (in the client's terminals when it offers them and has no
    live-output convention of its own), ``client`` (whenever it offers them) or ``agent``."""
    default_mode: str = "default"
    """The permission mode new sessions start in (``default``, ``accept_edits``, ``auto``,
    ``plan``, ``bypass``)."""
    sandbox: str = "auto"
    """The sandbox under commands: ``auto`` (wherever the system has one) or ``off``."""
    state_dir: Path | None = None
    """Where session logs live; ``None`` keeps sessions in memory only (no load/list/resume)."""
    clock: Callable[[], str] = utc_now
    secrets: tuple[str, ...] = ()
    """Values never to write to a session log (the API key), besides secret-looking variables."""
    log_level: str = "warning"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    warm_imports: tuple[str, ...] = ()
    """Modules to import in the background right after ``initialize`` (what ``tools`` needs)."""

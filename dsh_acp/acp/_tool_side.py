"""The tools of a connection's sessions: the process-wide ones, with the mode gate first, and each
session's layer over them with what its tools reach beyond the process (the command sandbox, the
client's questions, terminals and file system when the client offers them, and the journal of
every file write, which ``/undo`` reads).

Made when a session first needs its tools (its first prompt, its MCP servers), never for an idle
session: the tool modules and the file system, terminal and question seams load here.
"""

from __future__ import annotations

from anyio.abc import TaskGroup

from dsh_acp._config import AgentConfig
from dsh_acp.models._settings import default_config_path
from dsh_acp.permissions._mode_gate import mode_gate
from dsh_acp.rpc._errors import INTERNAL_ERROR, RpcError
from dsh_acp.session._file_journal import FileJournal, KeptFiles
from dsh_acp.session._session import Session
from dsh_acp.session._store import SessionStore
from dsh_acp.wire._client_profile import ClientProfile
from dsh_tools import Services, SessionTasks, ToolRegistry
from dsh_tools.filesystem import FileSystem, LocalFileSystem
from dsh_tools.questions import UserQuestions
from dsh_tools.sandbox import CommandSandbox, sandbox_support
from dsh_tools.terminals import TerminalHost

from ._client_fs import ClientFileSystem
from ._client_terminals import ClientTerminals
from ._elicitation import ClientQuestions

__all__ = ["SessionTools"]


class SessionTools:
    """The process-wide tools (``shared``; ``RpcError`` when the configured ones cannot be made)
    and each session's layer over them (``layer``)."""

    def __init__(self, config: AgentConfig, background: TaskGroup, store: SessionStore | None) -> None:
        self.config = config
        self._background = background
        self._store = store
        state = (str(config.state_dir),) if config.state_dir is not None else ()
        self.agent_folders = (str(default_config_path().parent), *state)
        """The agent's own folders, where a tool call's card may not name a path unasked and a
        command may not look: the configuration (the API key ``dsh-acp login`` keeps) and the state
        (session logs, the approvals kept for projects)."""
        self.shared = self._shared_tools()

    def _shared_tools(self) -> ToolRegistry:
        tools = ToolRegistry()
        # The mode policy goes first so that it wraps every other policy (see _mode_gate).
        tools.on_pre_execute(mode_gate(tools, self.agent_folders))
        config = self.config
        try:
            # A --tools module that does not load stopped the command already (launch's
            # _tool_modules); what is left is a configuration built in code, or a tool named
            # like a reference tool.
            for definition in config.tools() if config.tools else ():
                tools.register(definition)
        except Exception as error:  # the user's tools, not the agent's code
            message = " ".join(str(error).split())
            raise RpcError(INTERNAL_ERROR, f"the tools could not be loaded: {message:.500}") from None
        if config.configure_registry is not None:
            config.configure_registry(tools)
        return tools

    def layer(self, session: Session, profile: ClientProfile) -> tuple[ToolRegistry, Services]:
        """A session's tools (its layer over the shared ones) and what they reach."""
        # Tasks a tool leaves running (a background command) end with the session.
        registry, services = (
            self.shared.layer(),
            Services(session.permissions, SessionTasks(self._background)),
        )
        services.add(registry, as_type=ToolRegistry)  # what the mode policy looks up
        # Commands: the session's folders writable, the user's secret stores and ours hidden.
        roots = (session.cwd, *session.additional_directories)
        sandbox = sandbox_support(self.config.sandbox)
        services.add(CommandSandbox(sandbox, roots, private_dirs=self.agent_folders))
        self._add_client_services(session, profile, registry, services)
        self._add_file_journal(session, services)
        return registry, services

    def _add_client_services(
        self, session: Session, profile: ClientProfile, registry: ToolRegistry, services: Services
    ) -> None:
        """What the session's tools reach through the client, for what this client offers."""
        config, session_id, request = self.config, session.session_id, session.io.request
        if config.ask_user is not None and profile.questions:  # a tool that cannot work is never offered
            ask_tool = config.ask_user()
            if self.shared.get(ask_tool.name) is None:
                registry.register(ask_tool)
                services.add(ClientQuestions(request, session_id), as_type=UserQuestions)
        if profile.client_terminals:
            services.add(ClientTerminals(request, session_id), as_type=TerminalHost)
        can_read, can_write = profile.can_read, profile.can_write
        if (can_read or can_write) and not config.force_local_fs:
            client_fs = ClientFileSystem(request, session_id, can_read=can_read, can_write=can_write)
            services.add(client_fs, as_type=FileSystem)

    def _add_file_journal(self, session: Session, services: Services) -> None:
        """Every write through the session's file system (the client's or the disk) is logged,
        and what the file held kept, for ``/undo``."""
        # mypy rejects an abstract class as a type[T] argument (python/mypy#4717).
        inner = services.get(FileSystem) or LocalFileSystem()  # type: ignore[type-abstract]
        store = self._store
        kept = KeptFiles(store.kept_folder(session.session_id) if store is not None else None)
        journal = FileJournal(inner, kept, session.record, lambda: session.prompts - 1)
        services.add(journal, as_type=FileSystem)

"""What a session's tools reach beyond the process: the client's questions, terminals and file
system when the client offers them, and the journal of every file write (``/undo`` reads it).

Made when a session first needs its tools (its first prompt), never for an idle session: the
file system, terminal and question seams load here, with the tools.
"""

from __future__ import annotations

from dsh_acp._config import AgentConfig
from dsh_acp.session._file_journal import FileJournal, KeptFiles
from dsh_acp.session._session import Session
from dsh_acp.session._store import SessionStore
from dsh_acp.wire._client_profile import ClientProfile
from dsh_tools import Services, ToolRegistry
from dsh_tools.filesystem import FileSystem, LocalFileSystem
from dsh_tools.questions import UserQuestions
from dsh_tools.terminals import TerminalHost

from ._client_fs import ClientFileSystem
from ._client_terminals import ClientTerminals
from ._elicitation import ClientQuestions

__all__ = ["add_client_services", "add_file_journal"]


def add_client_services(
    config: AgentConfig,
    profile: ClientProfile,
    shared: ToolRegistry,
    session: Session,
    registry: ToolRegistry,
    services: Services,
) -> None:
    """What the session's tools (``registry``, its layer over the ``shared`` ones) reach through
    the client, for what this client offers."""
    session_id, request = session.session_id, session.io.request
    if config.ask_user is not None and profile.questions:  # a tool that cannot work is never offered
        ask_tool = config.ask_user()
        if shared.get(ask_tool.name) is None:
            registry.register(ask_tool)
            services.add(ClientQuestions(request, session_id), as_type=UserQuestions)
    if profile.client_terminals:
        services.add(ClientTerminals(request, session_id), as_type=TerminalHost)
    can_read, can_write = profile.can_read, profile.can_write
    if (can_read or can_write) and not config.force_local_fs:
        client_fs = ClientFileSystem(request, session_id, can_read=can_read, can_write=can_write)
        services.add(client_fs, as_type=FileSystem)


def add_file_journal(store: SessionStore | None, session: Session, services: Services) -> None:
    """Every write through the session's file system (the client's or the disk) is logged, and
    what the file held kept, for ``/undo``."""
    # mypy rejects an abstract class as a type[T] argument (python/mypy#4717).
    inner = services.get(FileSystem) or LocalFileSystem()  # type: ignore[type-abstract]
    kept = KeptFiles(store.kept_folder(session.session_id) if store is not None else None)
    journal = FileJournal(inner, kept, session.record, lambda: session.prompts - 1)
    services.add(journal, as_type=FileSystem)

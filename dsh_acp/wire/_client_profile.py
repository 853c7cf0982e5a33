"""What the client can show, read once from ``initialize``: one frozen value per connection.

How a command's output reaches the user (docs/clients.md has this table):

| the client advertises (``initialize``)                | ``bash`` runs | live output                       |
|-------------------------------------------------------|---------------|-----------------------------------|
| ``clientCapabilities._meta.terminal_output_delta``    | in the agent  | ``_meta.terminal_output_delta``   |
| ``clientCapabilities._meta.terminal_output`` (Zed)    | in the agent  | ``_meta.terminal_output``         |
| a JetBrains ``clientInfo`` (name ``JetBrains…`` or    | in the agent  | ``_meta.terminal_output_delta``   |
| ``clientInfo._meta.platform == "intellij"``)          |               |                                   |
| ``clientCapabilities.terminal`` (Toad, acpx)          | in the client | its own terminal (``terminal/*``) |
| none of these                                         | in the agent  | none: fenced output at the end,   |
|                                                       |               | with the exit status              |

``--terminals client`` uses the client's terminals whenever it offers them (Zed's too);
``--terminals agent`` never does.

How a subagent's tool calls (the ``task`` tool) reach the user:

| the client advertises (``initialize``)                | a subagent's tool calls                         |
|-------------------------------------------------------|-------------------------------------------------|
| ``clientCapabilities._meta.parentToolCallId: true``   | cards of their own, each ``tool_call`` and       |
|                                                       | update with ``_meta.parentToolCallId``: the task |
| none of this                                          | lines of the task card's content (title, status) |

Only a client that says it nests gets child cards: any other would show them as if the main
agent made them. The draft subagents RFD's child sessions (``subagent_update``) are not in the
stable v1 schema, so no client is sent them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ClientProfile", "TerminalKey", "TerminalsChoice", "client_profile", "is_jetbrains", "is_zed"]

TerminalKey = Literal["terminal_output", "terminal_output_delta"]
TerminalsChoice = Literal["auto", "client", "agent"]


@dataclass(frozen=True, slots=True)
class ClientProfile:
    """The client's abilities that change what the agent sends."""

    protocol: int = 1
    """The ACP version the connection speaks (``initialize`` negotiated it): 1, or the v2 draft."""
    terminal_key: TerminalKey | None = None
    """The ``_meta`` key for live output of commands the agent runs; ``None``: no live output."""
    client_terminals: bool = False
    """Whether ``bash`` runs foreground commands in the client's terminals (``terminal/*``)."""
    can_read: bool = False
    can_write: bool = False
    """``fs.readTextFile`` / ``fs.writeTextFile``: files through the editor's buffers."""
    compaction: bool = False
    """Whether the client shows compactions (``session.compaction``)."""
    notices: bool = False
    """Whether the client shows ``notice`` updates (``session.notices``)."""
    questions: bool = False
    """Whether the client asks the user questions in forms (``elicitation.form``)."""
    boolean_options: bool = False
    """Whether the client shows boolean config options (``session.configOptions.boolean``)."""
    terminal_login: bool = False
    """Whether the client can run a login command in a terminal (``auth.terminal``)."""
    meta_terminal_login: bool = False
    """Whether the client runs the command of an auth method's ``_meta["terminal-auth"]`` (it
    advertises ``_meta["terminal-auth"]``: older clients, the ACP registry's verifier)."""
    option_names: bool = False
    """Whether the client is known to show each permission option's ``name`` (Zed, JetBrains).
    Others may show only a label per ``kind`` (CodeCompanion), so they never get two options
    of one kind that mean different things."""
    nested_calls: bool = False
    """Whether the client shows a tool call under the one it names in ``_meta.parentToolCallId``
    (it advertises ``_meta.parentToolCallId``): a subagent's calls are then cards of their own."""


def is_jetbrains(client_info: Mapping[str, Any] | None) -> bool:
    """Whether ``clientInfo`` names a JetBrains IDE. They call themselves ``JetBrains.<IDE>``
    (``JetBrains.WebStorm``) and put ``platform: "intellij"`` in ``_meta``, and render the
    ``terminal_output_delta`` convention without advertising it."""
    if not isinstance(client_info, Mapping):
        return False
    name = client_info.get("name")
    meta = client_info.get("_meta")
    return (isinstance(name, str) and name.lower().startswith("jetbrains")) or (
        isinstance(meta, Mapping) and meta.get("platform") == "intellij"
    )


def is_zed(client_info: Mapping[str, Any] | None) -> bool:
    """Whether ``clientInfo`` names Zed (``{"name": "zed", ...}``)."""
    return isinstance(client_info, Mapping) and client_info.get("name") in ("zed", "Zed")


def client_profile(
    capabilities: Mapping[str, Any] | None,
    client_info: Mapping[str, Any] | None = None,
    terminals: TerminalsChoice = "auto",
) -> ClientProfile:
    """The profile of a client from ``initialize``'s ``clientCapabilities`` and ``clientInfo``."""
    capabilities = _table(capabilities)
    meta = _table(capabilities.get("_meta"))
    key = _terminal_key(meta, client_info)
    offers = capabilities.get("terminal") is True
    use_client = offers and (terminals == "client" or (terminals == "auto" and key is None))
    fs = _table(capabilities.get("fs"))
    session = _table(capabilities.get("session"))
    options = session.get("configOptions")
    elicitation = capabilities.get("elicitation")
    auth = capabilities.get("auth")
    return ClientProfile(
        terminal_key=None if use_client else key,
        client_terminals=use_client,
        can_read=fs.get("readTextFile") is True,
        can_write=fs.get("writeTextFile") is True,
        compaction=isinstance(session.get("compaction"), Mapping),
        notices=isinstance(session.get("notices"), Mapping),
        questions=isinstance(elicitation, Mapping) and isinstance(elicitation.get("form"), Mapping),
        boolean_options=isinstance(options, Mapping) and isinstance(options.get("boolean"), Mapping),
        terminal_login=isinstance(auth, Mapping) and auth.get("terminal") is True,
        meta_terminal_login=meta.get("terminal-auth") is True,
        option_names=is_zed(client_info) or is_jetbrains(client_info),
        nested_calls=meta.get("parentToolCallId") is True,
    )


def _table(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one (a client may send anything)."""
    return value if isinstance(value, Mapping) else {}


def _terminal_key(meta: Mapping[str, Any], client_info: Mapping[str, Any] | None) -> TerminalKey | None:
    """The ``_meta`` key the client draws a live terminal from, if it draws one."""
    if meta.get("terminal_output_delta") is True:
        return "terminal_output_delta"
    if meta.get("terminal_output") is True:
        return "terminal_output"
    if is_jetbrains(client_info):
        return "terminal_output_delta"
    return None

"""The MCP SDK's client session, declaring only the questions the editor can be asked.

The SDK declares elicitation in both modes, form and URL, whenever it is given a handler, and
has no setting to declare one mode only. The editor is asked forms only (ACP's
``elicitation/create`` in form mode), so a server told it may send URL questions would send
ones that can only be declined. The session here keeps the SDK's capabilities and narrows
elicitation to form. It overrides the SDK's one place that builds the capabilities
(``_build_capabilities``, private): a later SDK that renamed it would declare URL mode again,
which the MCP elicitation golden (the server reports the modes it was told) shows at once.

Imported only where a server is started: the SDK costs about a second to import.
"""

from __future__ import annotations

from mcp.client.session import ClientSession
from mcp_types import ClientCapabilities, ElicitationCapability, FormElicitationCapability

__all__ = ["FormOnlyClientSession"]


class FormOnlyClientSession(ClientSession):
    """A ``ClientSession`` whose elicitation capability, when it has one, is form mode only."""

    def _build_capabilities(self, version: str) -> ClientCapabilities:
        capabilities = super()._build_capabilities(version)
        if capabilities.elicitation is None:
            return capabilities
        form_only = ElicitationCapability(form=FormElicitationCapability())
        return capabilities.model_copy(update={"elicitation": form_only})

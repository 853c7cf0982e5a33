"""Pydantic models of what clients send us: validation happens here, at the boundary where
untrusted data enters. What we send is built as plain dicts (it is ours; validating it again on
the hot path would only cost time), and tests check it against the official schema instead.

The models are lenient where the schema is (unknown keys are ignored, capabilities default on
error) and strict where our behaviour depends on a value (absolute paths, non-empty ids).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from dsh_acp.rpc._errors import validation_error
from dsh_tools import ContentBlock

__all__ = [
    "AuthenticateParams",
    "CloseSessionParams",
    "EnvVariable",
    "ForkSessionParams",
    "ListSessionsParams",
    "LoadSessionParams",
    "McpServerStdio",
    "NewSessionParams",
    "PromptParams",
    "ResumeSessionParams",
    "SessionIdParams",
    "SetConfigOptionParams",
    "SetModeParams",
    "parse_params",
]


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"must be an absolute path, not {path!r}")
    return os.path.normpath(path)


_P = TypeVar("_P", bound=BaseModel)

AbsolutePath = Annotated[str, AfterValidator(_absolute)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Params(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True, populate_by_name=True)


class EnvVariable(_Params):
    """One environment variable of an MCP server."""

    name: str
    value: str


class McpServerStdio(_Params):
    """An MCP server the agent starts itself, speaking over its stdio."""

    name: str
    command: str
    args: list[str] = Field(default_factory=list)
    env: list[EnvVariable] = Field(default_factory=list)


class AuthenticateParams(_Params):
    method_id: str = Field(alias="methodId")


class NewSessionParams(_Params):
    cwd: AbsolutePath
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list, alias="mcpServers")
    additional_directories: list[AbsolutePath] = Field(default_factory=list, alias="additionalDirectories")


class SessionIdParams(_Params):
    session_id: NonEmpty = Field(alias="sessionId")


class LoadSessionParams(NewSessionParams):
    session_id: NonEmpty = Field(alias="sessionId")


class ResumeSessionParams(LoadSessionParams):
    replay_from: dict[str, Any] | None = Field(default=None, alias="replayFrom")
    """v2: where the replay starts (``{"type": "start"}``); ``None``: no replay."""


class ForkSessionParams(LoadSessionParams):
    """``session/fork``: the session to copy (``sessionId``) and where the copy works."""


CloseSessionParams = SessionIdParams


class PromptParams(_Params):
    session_id: NonEmpty = Field(alias="sessionId")
    prompt: list[ContentBlock]


class ListSessionsParams(_Params):
    cwd: AbsolutePath | None = None
    cursor: str | None = None


class SetModeParams(_Params):
    session_id: NonEmpty = Field(alias="sessionId")
    mode_id: NonEmpty = Field(alias="modeId")


class SetConfigOptionParams(_Params):
    session_id: NonEmpty = Field(alias="sessionId")
    config_id: NonEmpty = Field(alias="configId")
    value: str | bool


def parse_params(model: type[_P], params: Any) -> _P:
    """Parse a request's params at the boundary; a failure is -32602 with the field errors as data."""
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as error:
        raise validation_error(error) from None

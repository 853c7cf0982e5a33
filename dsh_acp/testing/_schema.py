"""Validating ACP messages against the official JSON schema, each by its specific definition.

The schema is never copied into a project: it is the file ``schema/v1/schema.unstable.json`` (and
for connections that speak ACP v2, ``schema/v2/schema.unstable.json``) of the pinned npm package
``@agentclientprotocol/sdk``, found through the ``ACP_SCHEMA`` environment variable (the path of
the v1 file; the v2 file is found beside it, in the package's layout, or at ``ACP_SCHEMA_V2``) or
in the user cache, where ``dsh-acp schema fetch`` puts them. Each message is checked against the
official file and against its strict form, derived from it here (the official file would accept
``raw_input`` or a ``_meta`` key at the root).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._schema_source import (
    ACP_SDK_PACKAGE,
    ACP_SDK_VERSION,
    FETCH_COMMAND,
    SchemaFetchError,
    cached_schema_path,
    fetch_schema,
)
from ._strict import strict_schema, strict_wrapper

__all__ = ["AcpSchema", "SchemaNotFound", "SchemaViolation", "locate_schema"]

_ENV = {1: "ACP_SCHEMA", 2: "ACP_SCHEMA_V2"}


class SchemaNotFound(FileNotFoundError):
    """The official ACP schema is neither where ``ACP_SCHEMA`` says nor in the user cache."""


class SchemaViolation(AssertionError):
    """A message does not validate against its definition."""


def locate_schema(*, fetch: bool = False, protocol: int = 1) -> Path:
    """The official schema of ACP version ``protocol``: ``$ACP_SCHEMA`` (v1) or
    ``$ACP_SCHEMA_V2``, else the pinned version in the user cache (downloaded first when
    ``fetch`` is true and npm is installed).
    """
    env = os.environ.get(_ENV[protocol])
    if env:
        path = Path(env)
        if path.is_dir():
            path = path / "schema.json"
        if not path.is_file():
            raise SchemaNotFound(f"{_ENV[protocol]}={env} is not the ACP schema.json")
        return path
    cached = cached_schema_path(protocol=protocol)
    if cached.is_file():
        return cached
    if fetch:
        try:
            return fetch_schema(protocol=protocol)
        except SchemaFetchError as error:
            raise SchemaNotFound(f"the ACP schema is not in {cached}; fetching it failed: {error}") from error
    raise SchemaNotFound(
        f"the ACP schema ({ACP_SDK_PACKAGE} {ACP_SDK_VERSION}) is not in {cached}: run `{FETCH_COMMAND}` "
        f"(needs npm), or set {_ENV[protocol]} to the path of a schema.json"
    )


def _protocol_of(document: Mapping[str, Any]) -> int:
    """The ACP version a schema describes: v2's ``initialize`` names the client ``info``, v1's
    ``clientInfo``."""
    request = document.get("$defs", {}).get("InitializeRequest", {})
    return 2 if "info" in request.get("properties", {}) else 1


class AcpSchema:
    """The official schema's definitions, with a validator per definition built on demand."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else locate_schema()
        self.official: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        self.protocol = _protocol_of(self.official)
        """The ACP version this schema describes (1 or 2)."""
        self._versions: dict[int, AcpSchema] = {self.protocol: self}
        self.strict: dict[str, Any] = strict_schema(self.official)
        defs: dict[str, Any] = self.official["$defs"]
        self.agent_responses: dict[str, str] = {}
        self.agent_requests: dict[str, str] = {}
        self.client_requests: dict[str, str] = {}
        self.client_responses: dict[str, str] = {}
        for name, definition in defs.items():
            method, side = definition.get("x-method"), definition.get("x-side")
            if not method:
                continue
            if side == "agent" and name.endswith("Response"):
                self.agent_responses[method] = name  # what the agent answers to `method`
            elif side == "agent" and name.endswith(("Request", "Notification")):
                self.client_requests[method] = name  # what the client sends to the agent
            elif side == "client" and name.endswith(("Request", "Notification")):
                self.agent_requests[method] = name  # what the agent sends to the client
            elif side == "client" and name.endswith("Response"):
                self.client_responses[method] = name
            elif side == "protocol":
                self.agent_requests[method] = name
                self.client_requests[method] = name

    def for_protocol(self, protocol: int) -> AcpSchema:
        """The schema of ACP version ``protocol`` from the same package: this one, or the file of
        the same name in the package's folder for that version (``schema/v2/`` beside
        ``schema/v1/``), or where ``ACP_SCHEMA_V2`` says."""
        found = self._versions.get(protocol)
        if found is None:
            env = os.environ.get(_ENV.get(protocol, ""))
            sibling = self.path.parent.parent / f"v{protocol}" / self.path.name
            path = locate_schema(protocol=protocol) if env or not sibling.is_file() else sibling
            found = AcpSchema(path)
            if found.protocol != protocol:
                raise SchemaNotFound(f"{path} is not the schema of ACP version {protocol}")
            found._versions = self._versions
            self._versions[protocol] = found
        return found

    @functools.cache  # noqa: B019 - one schema object per test session; caching per instance is the point
    def _validators(self, definition: str) -> list[Any]:
        from jsonschema import Draft202012Validator  # the testing extra: only to check

        if definition not in self.official["$defs"]:
            raise KeyError(f"the ACP schema has no definition {definition!r}")
        official = {"$defs": self.official["$defs"], "$ref": f"#/$defs/{definition}"}
        return [Draft202012Validator(official), Draft202012Validator(strict_wrapper(self.strict, definition))]

    def validate(self, definition: str, value: Any) -> None:
        """Raise ``SchemaViolation`` unless ``value`` matches ``definition`` (official, then strict)."""
        for validator in self._validators(definition):
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
            if errors:
                best = errors[0]
                where = "/".join(str(p) for p in best.absolute_path) or "(root)"
                raise SchemaViolation(
                    f"{definition} at {where}: {best.message}\n  value: {json.dumps(value)[:600]}"
                )

    def validate_agent_message(self, message: Mapping[str, Any], answered_method: str | None = None) -> str:
        """Validate one message the agent wrote; return the definition it was checked against.

        ``answered_method`` is the method of the client request a response answers (the caller
        tracks ids). Errors are checked against ``Error``.
        """
        if message.get("jsonrpc") != "2.0":
            raise SchemaViolation(f"not JSON-RPC 2.0: {json.dumps(message)[:200]}")
        if "method" in message:
            method = message["method"]
            if "id" in message and not isinstance(message["id"], int | str):
                raise SchemaViolation(f"bad id in {json.dumps(message)[:200]}")
            if method.startswith("_"):
                return "(extension)"
            definition = self.agent_requests.get(method)
            if definition is None:
                raise SchemaViolation(f"the agent sent an unknown method {method!r}")
            self.validate(definition, message.get("params"))
            return definition
        if "error" in message:
            if set(message) - {"jsonrpc", "id", "error"}:
                raise SchemaViolation(f"an error response has extra keys: {json.dumps(message)[:200]}")
            self.validate("Error", message["error"])
            return "Error"
        if "result" not in message or "id" not in message:
            raise SchemaViolation(f"neither request, notification nor response: {json.dumps(message)[:200]}")
        if answered_method is None:
            raise SchemaViolation(f"a response to an unknown request id: {json.dumps(message)[:200]}")
        definition = self.agent_responses.get(answered_method)
        if definition is None:
            if answered_method.startswith("_"):
                return "(extension)"
            raise SchemaViolation(f"no response definition for {answered_method!r}")
        self.validate(definition, message["result"])
        return definition

"""Validating ACP messages against the official JSON schema, each by its specific definition.

The schema is never copied into a project: it is found through the ``ACP_SCHEMA`` environment
variable (the path of ``schema.json``) or at ``../shared/acp-schema/v1/schema.json`` from the
working directory or any of its parents. Each message is checked against the official file and
against ``schema.strict.json`` beside it (which rejects keys the schema does not name: the
official file would accept ``raw_input`` or a ``_meta`` key at the root).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["AcpSchema", "SchemaNotFound", "SchemaViolation", "locate_schema"]


class SchemaNotFound(FileNotFoundError):
    """The official ACP schema is not where ``ACP_SCHEMA`` or the default location says."""


class SchemaViolation(AssertionError):
    """A message does not validate against its definition."""


def _hoist_unevaluated(node: Any) -> Any:
    """Repair the strict schema where it rejects valid messages.

    ``schema.strict.json`` puts ``unevaluatedProperties: false`` inside the ``oneOf``/``anyOf``
    branches of objects that also list ``properties`` of their own (``SessionConfigOption``,
    ``SetSessionConfigOptionRequest``, the elicitation types). A branch cannot see its parent's
    properties, so every valid option (its ``id``, ``name``) is rejected. Moving the keyword up to
    the parent keeps the intent — no key the definition does not name — and sees both.
    """
    if isinstance(node, list):
        return [_hoist_unevaluated(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _hoist_unevaluated(value) for key, value in node.items()}
    if "properties" in node:
        for key in ("oneOf", "anyOf"):
            branches = node.get(key)
            if isinstance(branches, list) and any(
                isinstance(b, dict) and b.get("unevaluatedProperties") is False for b in branches
            ):
                node[key] = [
                    {k: v for k, v in b.items() if k != "unevaluatedProperties"} if isinstance(b, dict) else b
                    for b in branches
                ]
                node["unevaluatedProperties"] = False
    return node


def locate_schema(start: str | Path | None = None) -> Path:
    """The official ``schema.json``: ``$ACP_SCHEMA``, else ``shared/acp-schema/v1/schema.json``
    in a parent folder of ``start`` (default: the working directory)."""
    env = os.environ.get("ACP_SCHEMA")
    if env:
        path = Path(env)
        if path.is_dir():
            path = path / "schema.json"
        if not path.is_file():
            raise SchemaNotFound(f"ACP_SCHEMA={env} is not the ACP schema.json")
        return path
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "shared" / "acp-schema" / "v1" / "schema.json"
        if candidate.is_file():
            return candidate
    raise SchemaNotFound("ACP schema not found: set ACP_SCHEMA to the path of acp-schema/v1/schema.json")


class AcpSchema:
    """The official schema's definitions, with a validator per definition built on demand."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else locate_schema()
        self.official: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        strict_path = self.path.with_name("schema.strict.json")
        self.strict: dict[str, Any] | None = (
            _hoist_unevaluated(json.loads(strict_path.read_text(encoding="utf-8")))
            if strict_path.is_file()
            else None
        )
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

    @functools.cache  # noqa: B019 - one schema object per test session; caching per instance is the point
    def _validators(self, definition: str) -> list[Any]:
        from jsonschema import Draft202012Validator

        validators = []
        for document in (self.official, self.strict):
            if document is None:
                continue
            if definition not in document["$defs"]:
                raise KeyError(f"the ACP schema has no definition {definition!r}")
            wrapper = {"$defs": document["$defs"], "$ref": f"#/$defs/{definition}"}
            if document is self.strict:
                wrapper["unevaluatedProperties"] = False
            validators.append(Draft202012Validator(wrapper))
        return validators

    def validate(self, definition: str, value: Any) -> None:
        """Raise ``SchemaViolation`` unless ``value`` matches ``definition`` (official and strict)."""
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

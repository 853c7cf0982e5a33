"""dsh_acp.testing: pin what an editor receives, byte for byte.

A client that drives the agent (in memory or as a real subprocess), validation of every message
against the official ACP schema, and golden wire scenarios. Needs the ``test`` extra
(``jsonschema``).
"""

from ._client import ZED_CAPABILITIES, AcpClient, PermissionAnswer, WireLine
from ._schema import AcpSchema, SchemaNotFound, SchemaViolation, locate_schema

__all__ = [
    "ZED_CAPABILITIES",
    "AcpClient",
    "AcpSchema",
    "PermissionAnswer",
    "SchemaNotFound",
    "SchemaViolation",
    "WireLine",
    "locate_schema",
]

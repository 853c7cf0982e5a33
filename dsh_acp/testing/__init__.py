"""dsh_acp.testing: pin what an editor receives, byte for byte.

A client that drives the agent (in memory or as a real subprocess), validation of every message
against the official ACP schema, and golden wire scenarios with a pytest integration
(``pytest --update-golden``). Needs the ``testing`` extra (``jsonschema``, ``pytest``):
``pip install 'dsh-acp[testing]'``. ``docs/tool-authors.md`` is the guide.

``AgentConfig`` (what the client's agent runs with) and ``RpcError`` (what a hook raises to answer
the agent's request with an error) are the ``dsh_acp`` names, offered here too so that a test
needs one import.
"""

from dsh_acp._config import AgentConfig
from dsh_acp.rpc._errors import RpcError

from ._checks import wire_problems
from ._client import ZED_CAPABILITIES, AcpClient, PermissionAnswer, WireLine
from ._fuzz import FrameGenerator, FuzzReport, fuzz_agent
from ._golden import Normalizer
from ._golden_check import GoldenCheck, golden_tests
from ._golden_diff import golden_diff
from ._scenario import (
    Mode,
    Scenario,
    ScenarioError,
    check_scenario,
    discover_scenarios,
    run_scenario,
    scenario_problems,
)
from ._schema import AcpSchema, SchemaNotFound, SchemaViolation, locate_schema

__all__ = [
    "ZED_CAPABILITIES",
    "AcpClient",
    "AcpSchema",
    "AgentConfig",
    "FrameGenerator",
    "FuzzReport",
    "GoldenCheck",
    "Mode",
    "Normalizer",
    "PermissionAnswer",
    "RpcError",
    "Scenario",
    "ScenarioError",
    "SchemaNotFound",
    "SchemaViolation",
    "WireLine",
    "check_scenario",
    "discover_scenarios",
    "fuzz_agent",
    "golden_diff",
    "golden_tests",
    "locate_schema",
    "run_scenario",
    "scenario_problems",
    "wire_problems",
]

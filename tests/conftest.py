"""Shared test configuration: async tests run on anyio's pytest plugin, asyncio backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_acp.testing import AcpSchema, locate_schema


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def acp_schema() -> AcpSchema:
    """The official ACP schema; its absence fails the run (CI points ACP_SCHEMA at it)."""
    return AcpSchema(locate_schema(Path(__file__).parent))

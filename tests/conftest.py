"""Shared test configuration: async tests run on anyio's pytest plugin, asyncio backend; agents
started by tests keep their session logs in a temp folder, never in the user's state dir."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    previous = os.environ.get("DSH_STATE_DIR")
    os.environ["DSH_STATE_DIR"] = str(tmp_path_factory.mktemp("dsh-state"))
    yield
    if previous is None:
        os.environ.pop("DSH_STATE_DIR", None)
    else:
        os.environ["DSH_STATE_DIR"] = previous

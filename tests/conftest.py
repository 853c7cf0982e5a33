"""Shared test configuration: async tests run on anyio's pytest plugin (asyncio backend); agents
started by tests keep their state in temp folders and see none of the user's model settings."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

_ISOLATED = ("DSH_MODEL", "DSH_BASE_URL", "DSH_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ["DSH_STATE_DIR"] = str(tmp_path_factory.mktemp("dsh-state"))
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("dsh-config"))
    for name in _ISOLATED:
        os.environ.pop(name, None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _no_learned_servers() -> None:
    """Each test starts with nothing learned about model servers. The model client remembers,
    per process, what a base URL's server said of a model (its context window); every fake
    server listens on 127.0.0.1 at a port the kernel picks, so a test whose fake got a port an
    earlier test's fake had used inherited that one's window (a 1024-token server's, from the
    compaction tests), and failed with a context error instead of its own."""
    learned = sys.modules.get("dsh_acp.models._openai_server")  # not imported here: tests see import costs
    if learned is not None:
        learned.SERVER_INFO.clear()

"""This repository's own source of the official ACP schema, for tests/ and examples/ alike.

The schema is the one in the npm package ``@agentclientprotocol/sdk`` that ``tests/client`` pins
in its lock file (the official-client test drives the same install): ``npm ci`` there on first
use, then ``schema/v1/schema.unstable.json`` inside it (and ``schema/v2/`` beside it for
connections that speak v2). ``ACP_SCHEMA`` (the path of a ``schema.json``) overrides it. Nothing
outside the clone is read: this overrides the kit's ``acp_schema`` fixture,
which would otherwise use the user cache.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from dsh_acp.testing import AcpSchema, SchemaNotFound, locate_schema
from dsh_acp.testing._schema_source import ACP_SDK_PACKAGE, ACP_SDK_VERSION, SCHEMA_FILE

# No per-example deadline: on a loaded shared machine an example can take a second, and speed is
# measured by the benches, not by tests.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# The suite starts several hundred agents. Where bytecode caching is switched off, each would
# compile every module again: its children keep their bytecode in a folder of the suite's own
# (outside the checkout), for every run and worker to reuse.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"dsh-acp-tests-bytecode-{os.getuid()}")
    )

CLIENT_DIR = Path(__file__).parent / "tests" / "client"
SDK_DIR = CLIENT_DIR / "node_modules" / ACP_SDK_PACKAGE


def install_pinned_sdk() -> Path:
    """The pinned SDK installed in ``tests/client`` (``npm ci`` from the lock file unless it is
    there already); raises ``SchemaNotFound`` saying what is missing."""
    # The suite runs in parallel workers: one installs while the others wait for it.
    with (CLIENT_DIR / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_pinned_sdk()


def _install_pinned_sdk() -> Path:
    if _installed(ACP_SDK_PACKAGE, ACP_SDK_VERSION) and all(
        _installed(name, version) for name, version in _dependencies().items()
    ):
        return SDK_DIR
    npm = shutil.which("npm")
    if npm is None:
        raise SchemaNotFound(
            f"npm is not installed: the tests install the ACP schema ({ACP_SDK_PACKAGE} {ACP_SDK_VERSION}) "
            "with `npm ci` in tests/client. Install Node.js 20 or later with npm, or set ACP_SCHEMA to "
            "the path of a schema.json"
        )
    result = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise SchemaNotFound(f"npm ci failed in {CLIENT_DIR}:\n{result.stdout}\n{result.stderr}")
    return SDK_DIR


def _dependencies() -> dict[str, str]:
    """What ``tests/client/package.json`` asks for (the SDK and the WebSocket client, ``ws``)."""
    return dict(json.loads((CLIENT_DIR / "package.json").read_text()).get("dependencies", {}))


def _installed(name: str, version: str) -> bool:
    manifest = CLIENT_DIR / "node_modules" / name / "package.json"
    return manifest.is_file() and json.loads(manifest.read_text()).get("version") == version


@pytest.fixture(scope="session")
def pinned_sdk() -> Path:
    """The folder of the pinned ``@agentclientprotocol/sdk`` under ``tests/client/node_modules``."""
    return install_pinned_sdk()


@pytest.fixture(scope="session")
def acp_schema() -> AcpSchema:
    if os.environ.get("ACP_SCHEMA"):
        return AcpSchema(locate_schema())
    return AcpSchema(install_pinned_sdk() / "schema" / "v1" / SCHEMA_FILE)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Most tests wait on a child process, not the CPU: twice the cores keeps them busy (4 at least)."""
    return max(4, 2 * (os.cpu_count() or 1))

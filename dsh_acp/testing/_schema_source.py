"""Where the official ACP schema comes from: the pinned npm package, cached per user.

The schema is another project's file, so it is never copied into a project that uses the kit. It
ships in the npm package ``@agentclientprotocol/sdk`` (``schema/v1/schema.json``); the version and
the tarball's integrity are pinned here, and ``dsh-acp schema fetch`` downloads exactly that
tarball with ``npm pack``, checks its integrity and keeps the schema in the user cache folder
(``$XDG_CACHE_HOME/dsh-acp/acp-schema/VERSION/schema.json``), where the kit looks for it.

Standard library only: the ``schema`` command must work without the test extra.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "ACP_SDK_INTEGRITY",
    "ACP_SDK_PACKAGE",
    "ACP_SDK_VERSION",
    "FETCH_COMMAND",
    "SchemaFetchError",
    "cached_schema_path",
    "fetch_schema",
    "schema_main",
]

ACP_SDK_PACKAGE = "@agentclientprotocol/sdk"
# The pin. tests/client/package-lock.json must name the same version and integrity (a test checks).
ACP_SDK_VERSION = "2.4.0"
ACP_SDK_INTEGRITY = (
    "sha512-7qJ8nnyj7WesC5ve185ioTpB2/svQoeGV4HA4nLEhgDUrcmBe54/08VcXc/oL4p14tDbxxECZzdYmUYQ+4l+Wg=="
)
SCHEMA_MEMBER = "package/schema/v1/schema.json"  # inside the npm tarball
FETCH_COMMAND = "dsh-acp schema fetch"
_NPM_MISSING = (
    "npm is not installed: `dsh-acp schema fetch` downloads the ACP schema with it. Install Node.js 20 "
    "or later with npm (https://nodejs.org, or `sudo apt install nodejs npm`) and run `dsh-acp schema "
    "fetch` again; or download {url}, unpack it and set ACP_SCHEMA to the package/schema/v1/schema.json "
    "inside it."
)


class SchemaFetchError(RuntimeError):
    """The pinned schema could not be fetched; the message says what to do."""


def tarball_url(version: str = ACP_SDK_VERSION) -> str:
    return f"https://registry.npmjs.org/{ACP_SDK_PACKAGE}/-/sdk-{version}.tgz"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/dsh-acp/acp-schema`` (default ``~/.cache/dsh-acp/acp-schema``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dsh-acp" / "acp-schema"


def cached_schema_path(version: str = ACP_SDK_VERSION) -> Path:
    """Where ``dsh-acp schema fetch`` keeps the schema of ``version`` (it may not exist yet)."""
    return cache_root() / version / "schema.json"


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def fetch_schema(npm: str | None = None, *, timeout: float = 180.0) -> Path:
    """The cached schema of the pinned version, downloaded first if it is not there yet.

    Raises ``SchemaFetchError`` (with what to install or check) when npm is missing, the download
    fails or the tarball is not the pinned one.
    """
    target = cached_schema_path()
    if target.is_file():
        return target
    npm = npm or shutil.which("npm")
    if npm is None:
        raise SchemaFetchError(_NPM_MISSING.format(url=tarball_url()))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="acp-schema-", dir=target.parent) as work:
        try:
            result = subprocess.run(
                [npm, "pack", f"{ACP_SDK_PACKAGE}@{ACP_SDK_VERSION}", "--json", "--pack-destination", work],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SchemaFetchError(f"npm pack {ACP_SDK_PACKAGE}@{ACP_SDK_VERSION} failed: {error}") from error
        tarballs = list(Path(work).glob("*.tgz"))
        if result.returncode != 0 or len(tarballs) != 1:
            detail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise SchemaFetchError(
                f"npm pack {ACP_SDK_PACKAGE}@{ACP_SDK_VERSION} failed (exit {result.returncode}); is the npm "
                f"registry reachable?\n  " + "\n  ".join(detail)
            )
        data = tarballs[0].read_bytes()
        if _integrity(data) != ACP_SDK_INTEGRITY:
            raise SchemaFetchError(
                f"{tarballs[0].name} is not the pinned {ACP_SDK_PACKAGE}@{ACP_SDK_VERSION}: its integrity "
                f"is {_integrity(data)}, expected {ACP_SDK_INTEGRITY}"
            )
        with tarfile.open(tarballs[0], "r:gz") as archive:
            member = archive.extractfile(SCHEMA_MEMBER)
            if member is None:
                raise SchemaFetchError(f"{tarballs[0].name} has no {SCHEMA_MEMBER}")
            schema = member.read()
        if "$defs" not in json.loads(schema):
            raise SchemaFetchError(f"{SCHEMA_MEMBER} in {tarballs[0].name} is not a JSON schema with $defs")
        partial = Path(work) / "schema.json"
        partial.write_bytes(schema)
        os.replace(partial, target)  # atomic: a concurrent run sees the whole file or none
    return target


def schema_main(argv: Sequence[str]) -> int:
    """``dsh-acp schema fetch`` (download the pinned schema into the cache) and ``dsh-acp schema path``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="dsh-acp schema",
        description=(
            f"The official ACP schema the testing kit validates against: {ACP_SDK_PACKAGE} "
            f"{ACP_SDK_VERSION}, file schema/v1/schema.json, kept in {cache_root()}."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download the pinned schema with npm (once) and print its path")
    commands.add_parser("path", help="print where the cached schema is (or will be)")
    args = parser.parse_args(argv)
    if args.command == "path":
        print(cached_schema_path())
        return 0
    try:
        path = fetch_schema()
    except SchemaFetchError as error:
        print(f"dsh-acp: {error}", file=sys.stderr)
        return 1
    print(path)
    return 0

"""Where the official ACP schema comes from: the pinned npm package, cached per user.

The schema is another project's file, so it is never copied into a project that uses the kit. It
ships in the npm package ``@agentclientprotocol/sdk``, one folder per protocol version
(``schema/v1/``, ``schema/v2/``), each with ``schema.json`` (the stable features) and
``schema.unstable.json`` (all of them). The kit validates against the latter: dsh-acp offers
``session/fork``, which is still unstable in both versions. The version and the tarball's
integrity are pinned here, and ``dsh-acp schema fetch`` downloads exactly that tarball with ``npm
pack``, checks its integrity and keeps its schemas in the user cache folder
(``$XDG_CACHE_HOME/dsh-acp/acp-schema/VERSION/v1/schema.unstable.json`` and ``v2/``, the
package's layout), where the kit looks for them.

Standard library only: the ``schema`` command must work without the test extra.
"""

from __future__ import annotations

import argparse
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
    "SCHEMA_FILE",
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
SCHEMA_FILE = "schema.unstable.json"
"""The file of each protocol version's folder the kit validates against (all of its features)."""
PROTOCOLS = (1, 2)
"""The protocol versions whose schemas the kit keeps (the folders ``v1/``, ``v2/``)."""
_MEMBERS = {
    f"package/schema/v{p}/{name}": f"v{p}/{name}" for p in PROTOCOLS for name in ("schema.json", SCHEMA_FILE)
}
"""What is kept of the npm tarball, and where under the cache folder of its version."""
FETCH_COMMAND = "dsh-acp schema fetch"
_NPM_MISSING = (
    "npm is not installed: `dsh-acp schema fetch` downloads the ACP schema with it. Install Node.js 20 "
    "or later with npm (https://nodejs.org, or `sudo apt install nodejs npm`) and run `dsh-acp schema "
    "fetch` again; or download {url}, unpack it and set ACP_SCHEMA to the "
    f"package/schema/v1/{SCHEMA_FILE} inside it."
)


class SchemaFetchError(RuntimeError):
    """The pinned schema could not be fetched; the message says what to do."""


def tarball_url(version: str = ACP_SDK_VERSION) -> str:
    return f"https://registry.npmjs.org/{ACP_SDK_PACKAGE}/-/sdk-{version}.tgz"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/dsh-acp/acp-schema`` (default ``~/.cache/dsh-acp/acp-schema``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dsh-acp" / "acp-schema"


def cached_schema_path(version: str = ACP_SDK_VERSION, protocol: int = 1) -> Path:
    """Where ``dsh-acp schema fetch`` keeps the schema of package ``version`` for ACP version
    ``protocol`` (it may not exist yet)."""
    return cache_root() / version / f"v{protocol}" / SCHEMA_FILE


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def fetch_schema(npm: str | None = None, *, timeout: float = 180.0, protocol: int = 1) -> Path:
    """The cached schema of the pinned version for ACP version ``protocol``, the package's
    schemas downloaded first if they are not there yet.

    Raises ``SchemaFetchError`` (with what to install or check) when npm is missing, the download
    fails or the tarball is not the pinned one.
    """
    target = cached_schema_path(protocol=protocol)
    if target.is_file():
        return target
    npm = npm or shutil.which("npm")
    if npm is None:
        raise SchemaFetchError(_NPM_MISSING.format(url=tarball_url()))
    folder = cached_schema_path(protocol=1).parent.parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="acp-schema-", dir=folder) as work:
        schemas = _unpacked_schemas(_pinned_tarball(npm, Path(work), timeout))
        # Each file lands whole (a rename); the v1 schema, which says "fetched", lands last.
        for name in sorted(schemas, key=lambda name: name == f"v1/{SCHEMA_FILE}"):
            partial = Path(work) / name.replace("/", "-")
            partial.write_bytes(schemas[name])
            (folder / name).parent.mkdir(exist_ok=True)
            os.replace(partial, folder / name)
    return target


def _pinned_tarball(npm: str, work: Path, timeout: float) -> Path:
    """``npm pack`` the pinned package into ``work``; the tarball, its integrity checked."""
    try:
        result = subprocess.run(
            [npm, "pack", f"{ACP_SDK_PACKAGE}@{ACP_SDK_VERSION}", "--json", "--pack-destination", str(work)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SchemaFetchError(f"npm pack {ACP_SDK_PACKAGE}@{ACP_SDK_VERSION} failed: {error}") from error
    tarballs = list(work.glob("*.tgz"))
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
    return tarballs[0]


def _unpacked_schemas(tarball: Path) -> dict[str, bytes]:
    """The schema files of the package (``v1/schema.json``…: where each goes) and their bytes."""
    schemas = {}
    with tarfile.open(tarball, "r:gz") as archive:
        for member, name in _MEMBERS.items():
            try:
                extracted = archive.extractfile(member)
            except KeyError:
                extracted = None
            if extracted is None:
                raise SchemaFetchError(f"{tarball.name} has no {member}")
            schema = extracted.read()
            if "$defs" not in json.loads(schema):
                raise SchemaFetchError(f"{member} in {tarball.name} is not a JSON schema with $defs")
            schemas[name] = schema
    return schemas


def schema_main(argv: Sequence[str]) -> int:
    """``dsh-acp schema fetch`` (download the pinned schema into the cache) and ``dsh-acp schema path``."""
    parser = argparse.ArgumentParser(
        prog="dsh-acp schema",
        description=(
            f"The official ACP schema the testing kit validates against: {ACP_SDK_PACKAGE} "
            f"{ACP_SDK_VERSION}, files schema/v1/{SCHEMA_FILE} and schema/v2/{SCHEMA_FILE}, kept in "
            f"{cache_root()}."
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

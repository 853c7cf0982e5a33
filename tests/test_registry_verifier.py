"""The ACP registry's verifier, as it runs an agent: a fresh HOME, no keys, a handful of
variables passed through, ``initialize`` with ``_meta["terminal-auth"]``, and at least one auth
method of type ``agent`` or ``terminal`` required (a method's type is its ``type``, else
``terminal`` when its ``_meta`` holds ``terminal-auth``, else ``agent``). Then what a client does
with the methods: CodeCompanion calls ``authenticate`` with the first one and stops on an error,
so it must succeed when the agent has what it needs, and say what to do when it has not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_acp import RpcError, build_config
from dsh_acp.testing import AcpClient, AcpSchema

DSH_ACP = Path(sys.executable).with_name("dsh-acp")
anyio_test = pytest.mark.anyio
PASSED_THROUGH = ("PATH", "TMPDIR", "TMP", "TEMP", "SSL_CERT_FILE", "SSL_CERT_DIR")
VERIFIER_INITIALIZE = {
    "protocolVersion": 1,
    "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
    "clientCapabilities": {
        "terminal": True,
        "fs": {"readTextFile": True, "writeTextFile": True},
        "_meta": {"terminal_output": True, "terminal-auth": True},
    },
}


def _fresh_env(home: Path, **extra: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_THROUGH if os.environ.get(name)}
    return {**env, "TERM": "dumb", "HOME": str(home), **extra}


def _exchange(command: list[str], env: dict[str, str], cwd: Path, *requests: tuple[str, Any]) -> list[Any]:
    """Each request's answer, the agent started as the verifier starts it (stdin closed after)."""
    lines = b"".join(
        orjson.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + b"\n"
        for n, (method, params) in enumerate(requests, 1)
    )
    done = subprocess.run(
        command, input=lines, env=env, cwd=cwd, capture_output=True, timeout=60, check=False
    )
    answers = {m["id"]: m for m in map(orjson.loads, done.stdout.splitlines()) if "id" in m}
    assert len(answers) == len(requests), done.stderr.decode()
    return [answers[n] for n in range(1, len(requests) + 1)]


def _method_type(method: dict[str, Any]) -> str:
    if method.get("type"):
        return str(method["type"])
    meta = method.get("_meta")
    if isinstance(meta, dict) and "terminal-auth" in meta:
        return "terminal"
    if isinstance(meta, dict) and "agent-auth" in meta:
        return "agent"
    return "agent"


def test_a_bare_dsh_acp_passes_the_registry_verifier(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    initialized, authenticated = _exchange(
        [str(DSH_ACP)],
        _fresh_env(home),
        tmp_path,
        ("initialize", VERIFIER_INITIALIZE),
        ("authenticate", {"methodId": "api-key"}),
    )
    methods = initialized["result"]["authMethods"]
    assert [m for m in methods if _method_type(m) in ("agent", "terminal")], methods
    # The older convention: the client runs the command itself, so it is absolute.
    (login,) = [m for m in methods if "terminal-auth" in m.get("_meta", {})]
    command = login["_meta"]["terminal-auth"]
    assert Path(command["command"]).is_absolute()
    assert Path(command["command"]).exists()
    assert command["args"][-1] == "login"
    # No model and no key: authenticate says what to do, as "authentication required".
    assert authenticated["error"]["code"] == -32000
    assert "dsh-acp login" in authenticated["error"]["message"]


@pytest.mark.parametrize("how", ["script", "key", "local"])
def test_authenticate_with_the_first_method_succeeds_when_the_agent_has_what_it_needs(
    tmp_path: Path, how: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    script = tmp_path / "script.json"
    script.write_text('{"turns": []}')
    args, extra = {
        "script": (["--model", f"script:{script}"], {}),
        "key": (["--model", "openai:gpt-4o"], {"OPENAI_API_KEY": "sk-test-not-a-real-key"}),
        "local": (["--model", "openai:qwen", "--base-url", "http://127.0.0.1:9/v1"], {}),
    }[how]
    code_companion = {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
        "clientInfo": {"name": "CodeCompanion.nvim", "version": "1.0.0"},
    }
    (initialized,) = _exchange(
        [str(DSH_ACP), *args], _fresh_env(home, **extra), tmp_path, ("initialize", code_companion)
    )
    first = initialized["result"]["authMethods"][0]["id"]
    (authenticated,) = _exchange(
        [str(DSH_ACP), *args],
        _fresh_env(home, **extra),
        tmp_path,
        ("initialize", code_companion),
        ("authenticate", {"methodId": first}),
    )[1:]
    assert authenticated == {"jsonrpc": "2.0", "id": 2, "result": {}}


@anyio_test
async def test_a_model_stored_while_the_agent_runs_is_found_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, acp_schema: AcpSchema
) -> None:
    for name in ("DSH_MODEL", "DSH_API_KEY", "DSH_BASE_URL", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    config = build_config(["--state-dir", str(tmp_path / "state")])
    assert config.models == []
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        with pytest.raises(RpcError, match="No model is configured"):
            await client.request("authenticate", {"methodId": "api-key"})
        # What `dsh-acp login` writes, in another process, while this agent runs.
        (tmp_path / "config" / "dsh-acp").mkdir(parents=True)
        (tmp_path / "config" / "dsh-acp" / "config.toml").write_text(
            'model = "deepseek-chat"\napi_key = "sk-test-not-a-real-key"\n'
        )
        assert await client.request("authenticate", {"methodId": "api-key"}) == {}
        answer = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        (model,) = [o for o in answer["configOptions"] if o["id"] == "model"]
        assert model["currentValue"] == "openai:deepseek-chat"
    client.assert_valid()

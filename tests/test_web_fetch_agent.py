"""``web_fetch`` through the real ``dsh-acp`` process: what each mode asks, and that a rejected
fetch sends no request at all."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_server import Site, serve

from dsh_acp.testing import AcpClient, AcpSchema

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve() as running:
        yield running


async def _run(
    tmp_path: Path, schema: AcpSchema, mode: str, urls: list[str], answers: list[str]
) -> AcpClient:
    calls = [
        {"tool_calls": [{"id": f"f{i}", "name": "web_fetch", "arguments": {"url": url}}]}
        for i, url in enumerate(urls)
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[*calls, {"text": "done"}]]}))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    args = ["--model", f"script:{script}", "--mode", mode, "--state-dir", str(tmp_path / "state")]
    async with AcpClient.subprocess(
        args, schema=schema, permission_answers=deque(answers), cwd=str(ws)
    ) as client:
        await client.initialize()
        session = await client.new_session(str(ws))
        assert await client.prompt(session, "read the docs") == {"stopReason": "end_turn"}
    client.assert_valid()
    return client


def _finished(client: AcpClient) -> dict[str, Any]:
    return {
        update["toolCallId"]: update
        for update in client.updates(None, {"tool_call_update"})
        if update.get("status") in ("completed", "failed")
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["default", "accept_edits", "plan"])
async def test_a_fetch_asks_first_in_every_mode_but_bypass_and_a_rejection_sends_nothing(
    mode: str, site: Site, acp_schema: AcpSchema, tmp_path: Path
) -> None:
    page = f"{site.url}/connection-pools.html"
    site.requests.clear()
    client = await _run(
        tmp_path, acp_schema, mode, [page, f"{site.url}/moved"], ["reject_once", "allow_once"]
    )
    asked = [request["params"]["toolCall"] for request in client.agent_requests]
    assert [(call["toolCallId"], call["kind"], call["title"]) for call in asked] == [
        ("f0", "fetch", f"Fetch {page}"),
        ("f1", "fetch", f"Fetch {site.url}/moved"),
    ]
    finished = _finished(client)
    assert finished["f0"]["status"] == "failed"
    assert finished["f1"]["status"] == "completed"
    assert "# Connection pools" in finished["f1"]["content"][0]["content"]["text"]
    # The rejected fetch never reached the server; the allowed one followed its redirect.
    assert [path for path, _ in site.requests] == ["/moved", "/connection-pools.html"]


@pytest.mark.slow
async def test_bypass_fetches_without_asking(site: Site, acp_schema: AcpSchema, tmp_path: Path) -> None:
    client = await _run(tmp_path, acp_schema, "bypass", [f"{site.url}/notes.md"], [])
    assert client.agent_requests == []
    assert _finished(client)["f0"]["status"] == "completed"

"""The agent as a network service (``dsh-acp --listen``), driven by the official SDK's Streamable
HTTP and WebSocket client transports (``tests/client/drive.mjs --connect`` and
``tests/client/remote.mjs``) against the real agent process.

What is checked: the tools session of ``test_official_client`` over each transport (the same
assertions as on stdio); requests without the token refused with nothing created; the start-up
refusals; two clients at once, each seeing only its own session, and a session held by a live
connection refused to another; a client whose connection drops mid-turn loading its session back
on a new connection within seconds; a client that never comes back having its turn cancelled and
its command killed after the grace period; SIGTERM closing every connection first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import test_official_client as official
from test_official_client import APP_PY, CLIENT_DIR, Run, _need

TOKEN = "remote-test-token-0123456789abcdef"
AGENT_ENV = {**official._without_model_settings(os.environ), "DSH_ACP_TOKEN": TOKEN}


class ListeningAgent:
    """A running ``dsh-acp --listen 127.0.0.1:0``: its URL and what it logged."""

    def __init__(self, args: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh_acp", "--listen", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        self.lines: list[str] = []
        self._url = threading.Event()
        self.url = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._url.wait(15):
            self.process.kill()
            raise AssertionError(f"the agent did not start listening:\n{self.log}")

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if not self.url and "serving ACP on " in line:
                self.url = line.split("serving ACP on ", 1)[1].split()[0]
                self._url.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/acp")

    def wait_for(self, text: str, seconds: float = 10) -> None:
        deadline = time.monotonic() + seconds
        while text not in self.log:
            assert time.monotonic() < deadline, f"the agent never logged {text!r}:\n{self.log}"
            time.sleep(0.05)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        finally:
            self._reader.join(5)
            if self.process.stderr is not None:
                self.process.stderr.close()


def _workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("workspace").resolve()
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text(APP_PY)
    (workspace / "README.md").write_text("# tiny app\n")
    return workspace


def _start(
    tmp_path_factory: pytest.TempPathFactory, script: str, workspace: Path, *args: str
) -> ListeningAgent:
    """The agent with a scripted model (``{{cwd}}`` in the script is ``workspace``)."""
    state = tmp_path_factory.mktemp("state")
    model = state / "model.json"
    model.write_text((CLIENT_DIR / script).read_text().replace("{{cwd}}", str(workspace)))
    command = ["--model", f"script:{model}", "--state-dir", str(state), "--mode", "default", *args]
    return ListeningAgent(command, AGENT_ENV, workspace)


def _node(
    request: pytest.FixtureRequest, script: str, *args: str, timeout: float = 40
) -> tuple[int, dict[str, Any]]:
    node = _need("node")
    _need("npm")
    request.getfixturevalue("pinned_sdk")
    result = subprocess.run(
        [node, str(CLIENT_DIR / script), *args],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    try:
        return result.returncode, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"{script} printed no document:\n{result.stdout}\n{result.stderr}") from None


def _remote(
    request: pytest.FixtureRequest,
    agent: ListeningAgent,
    workspace: Path,
    scenario: str,
    transport: str = "http",
) -> dict[str, Any]:
    """Run a scenario of ``tests/client/remote.mjs`` against ``agent``; what it printed."""
    code, doc = _node(
        request, "remote.mjs", "--url", agent.url, "--token", TOKEN, "--workspace", str(workspace),
        "--scenario", scenario, "--transport", transport,
    )  # fmt: skip
    assert code == 0, f"{doc.get('error')}\n{agent.log}"
    return doc


def _pid_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


# -- the tools session of test_official_client, over each transport ----------------------------


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_a_session_with_tools_and_permissions(
    transport: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = _workspace(tmp_path_factory)
    agent = _start(tmp_path_factory, "model.json", workspace)
    try:
        code, doc = _node(
            request,
            "drive.mjs",
            *("--connect", agent.url, "--transport", transport, "--token", TOKEN),
            *("--workspace", str(workspace), "--scenario", "tools", "--timeout-ms", "20000"),
        )
        assert code == 0, f"the driver failed: {doc.get('error')}\n{agent.log}"
        agent.wait_for("event=close")
        assert 'reason="the client' in agent.log  # it closed or disconnected: its own end
    finally:
        assert agent.stop() == 0, agent.log
    run = Run(doc, workspace)
    # What test_official_client checks of this session on stdio, over the network.
    for check in (
        official.test_the_sdk_accepted_every_message_as_sent,
        official.test_handshake_and_session,
        official.test_bash_is_a_live_terminal_card,
        official.test_permission_is_asked_while_pending_and_the_call_waits_for_the_answer,
        official.test_read_goes_through_the_editor,
        official.test_write_shows_a_new_file_diff_and_writes_through_the_editor,
        official.test_edit_shows_the_applied_hunk_and_writes_through_the_editor,
        official.test_the_turn_closes_every_call_and_ends,
    ):
        check(run)


# -- who may connect ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "env", "flags", "said"),
    [
        ("0.0.0.0:0", {}, [], "reachable from other machines: set DSH_ACP_TOKEN"),
        ("0.0.0.0:0", {}, ["--no-auth"], "reachable from other machines: set DSH_ACP_TOKEN"),
        ("127.0.0.1:0", {}, [], "set DSH_ACP_TOKEN to the bearer token clients must send, or give --no-auth"),
        ("127.0.0.1:0", {"DSH_ACP_TOKEN": "short"}, [], "DSH_ACP_TOKEN is shorter than 16 characters"),
        ("127.0.0.1", {"DSH_ACP_TOKEN": TOKEN}, [], "--listen takes HOST:PORT"),
    ],
)
def test_it_refuses_to_start_without_a_token(
    address: str, env: dict[str, str], flags: list[str], said: str, tmp_path: Path
) -> None:
    environ = {k: v for k, v in AGENT_ENV.items() if k != "DSH_ACP_TOKEN"} | env
    result = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "--listen", address, *flags, "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=20,
        check=False,
    )
    assert result.returncode == 2
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _http(
    url: str, method: str = "POST", body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


INITIALIZE = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
).encode()


@pytest.mark.slow
def test_requests_without_the_token_are_refused_and_create_nothing(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    workspace = _workspace(tmp_path_factory)
    agent = _start(
        tmp_path_factory, "remote_hello.json", workspace, "--allow-origin", "https://editor.example"
    )
    try:
        json_type = {"Content-Type": "application/json"}
        status, headers, _ = _http(agent.url, body=INITIALIZE, **json_type)
        assert status == 401
        assert headers["www-authenticate"].startswith("Bearer")
        wrong = {"Authorization": "Bearer " + TOKEN[:-1] + "x"}
        assert _http(agent.url, body=INITIALIZE, **json_type, **wrong)[0] == 401
        assert _http(agent.url, body=INITIALIZE, **json_type, Authorization=TOKEN)[0] == 401  # no scheme
        events = {"Accept": "text/event-stream", "Acp-Connection-Id": "x"}
        assert _http(agent.url, method="GET", **events)[0] == 401
        assert _http(agent.url, method="DELETE", **{"Acp-Connection-Id": "x"})[0] == 401
        ws_url = agent.url.replace("http://", "ws://")
        for headers_sent, status_expected in (
            ({}, 401),
            (wrong, 401),
            ({"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}, 403),
        ):
            with pytest.raises(InvalidStatus) as refused:
                connect(ws_url, additional_headers=headers_sent, open_timeout=10).close()
            assert refused.value.response.status_code == status_expected
        # The SDK's own clients with a wrong token: initialize fails, and says why.
        for transport in ("http", "websocket"):
            code, doc = _node(
                request,
                "drive.mjs",
                *("--connect", agent.url, "--transport", transport, "--token", TOKEN[:-1] + "x"),
                *("--workspace", str(workspace), "--scenario", "tools", "--timeout-ms", "10000"),
            )
            assert code == 1
            assert "401" in doc["error"]
        assert "event=open" not in agent.log  # nothing was created for any of them
        # The right token from an allowed origin gets in; the health check needs no token.
        allowed = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://editor.example"}
        with connect(ws_url, additional_headers=allowed, open_timeout=10) as socket:
            assert socket.response.headers["Acp-Connection-Id"]
        assert _http(f"{agent.origin}/healthz", method="GET")[:1] == (200,)
    finally:
        assert agent.stop() == 0, agent.log


@pytest.mark.slow
def test_no_auth_serves_loopback_without_a_token(tmp_path: Path) -> None:
    environ = {k: v for k, v in AGENT_ENV.items() if k != "DSH_ACP_TOKEN"}
    agent = ListeningAgent(["--no-auth", "--state-dir", str(tmp_path)], environ, tmp_path)
    try:
        status, headers, body = _http(agent.url, body=INITIALIZE, **{"Content-Type": "application/json"})
        assert status == 200
        assert headers["acp-connection-id"]
        assert json.loads(body)["result"]["protocolVersion"] == 1
    finally:
        assert agent.stop() == 0, agent.log


# -- many clients, one session each ----------------------------------------------------------------


@pytest.mark.slow
def test_two_clients_at_once_each_see_only_their_own_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = _workspace(tmp_path_factory)
    agent = _start(tmp_path_factory, "remote_hello.json", workspace)
    try:
        doc = _remote(request, agent, workspace, "concurrent")
    finally:
        assert agent.stop() == 0, agent.log
    assert doc["sdkErrors"] == []
    assert doc["prompts"] == [{"stopReason": "end_turn"}, {"stopReason": "end_turn"}]
    a, b = doc["clients"]
    sessions = doc["sessions"]
    assert sessions["A"] != sessions["B"]
    # Each client got its own session's updates and permission request, and nothing of the other's
    # (B's later updates are of A's session, which it loaded after A closed).
    assert {u["sessionId"] for u in a["updates"]} == {sessions["A"]}
    assert {u["sessionId"] for u in b["updates"][: doc["updatesBeforeLoad"]]} == {sessions["B"]}
    assert [p["sessionId"] for p in a["permissions"]] == [sessions["A"]]
    assert [p["sessionId"] for p in b["permissions"]] == [sessions["B"]]
    texts = [
        u["update"]["content"]["text"]
        for u in a["updates"]
        if u["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(texts) == "Saying hello.\n\nDone."  # the second step starts a paragraph
    # A session a connected client holds is not taken from it: a clear error.
    error = doc["loadWhileHeld"]["error"]
    assert "is open on another connection whose client is still connected" in error["message"]
    # Once A is gone, B loads A's session (the whole conversation replayed) and goes on with it.
    assert doc["loadAfterClose"] == {"result": doc["loadAfterClose"]["result"]}
    replay = [u["update"] for u in doc["replayed"] if u["sessionId"] == sessions["A"]]
    assert any(u["sessionUpdate"] == "user_message_chunk" for u in replay)
    assert any(u.get("toolCallId") == "call-hello" for u in replay)
    assert doc["promptAfterLoad"] == {"result": {"stopReason": "end_turn"}}


# -- clients that go away ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_a_dropped_client_loads_its_session_back_at_once(
    transport: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = _workspace(tmp_path_factory)
    agent = _start(tmp_path_factory, "remote_watch.json", workspace)  # the default grace: 30 s
    try:
        doc = _remote(request, agent, workspace, "reconnect", transport)
        pid = int((workspace / "sleep.pid").read_text())
        assert _pid_gone(pid, 5), "the command of the dropped turn still runs"
        assert "event=takeover" in agent.log
    finally:
        assert agent.stop() == 0, agent.log
    # The new connection took the session over well within the grace period: the dropped turn
    # was cancelled then, and the load answered in seconds.
    assert "result" in doc["load"], doc["load"]
    assert doc["loadMs"] < 5000
    replay = [u["update"] for u in doc["replayed"] if u["sessionId"] == doc["sessionId"]]
    users = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["Watch the logs"]
    watch = [u for u in replay if u.get("toolCallId") == "call-watch"]
    assert watch
    assert watch[-1].get("status") == "failed"  # cut off by the cancel, shown as such
    assert doc["promptAfterLoad"] == {"result": {"stopReason": "end_turn"}}
    b = doc["clients"][1]
    texts = [
        u["update"]["content"]["text"]
        for u in b["updates"]
        if u["update"]["sessionUpdate"] == "agent_message_chunk" and u not in doc["replayed"]
    ]
    assert texts[-1:] == ["Welcome back."]


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_a_client_that_never_returns_has_its_turn_cancelled_after_the_grace(
    transport: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = _workspace(tmp_path_factory)
    agent = _start(tmp_path_factory, "remote_watch.json", workspace, "--grace", "1")
    try:
        _remote(request, agent, workspace, "vanish", transport)
        gone = time.monotonic()
        pid = int((workspace / "sleep.pid").read_text())
        assert _pid_gone(pid, 10), f"the command outlived its client:\n{agent.log}"
        assert time.monotonic() - gone < 6
        agent.wait_for('reason="the client has been gone for 1 s"')
    finally:
        assert agent.stop() == 0, agent.log


@pytest.mark.slow
def test_sigterm_cancels_every_turn_and_exits(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workspace = _workspace(tmp_path_factory)
    agent = _start(tmp_path_factory, "remote_watch.json", workspace)  # the client stays "gone" 30 s
    try:
        _remote(request, agent, workspace, "vanish", "websocket")
        pid = int((workspace / "sleep.pid").read_text())
    finally:
        assert agent.stop() == 0, agent.log
    assert _pid_gone(pid, 2)
    assert 'reason="the agent is shutting down"' in agent.log


@pytest.mark.slow
def test_an_http_event_stream_cut_and_reopened_gets_what_waited(tmp_path: Path) -> None:
    # A proxy or a network blip ends the connection's event stream without a DELETE: the client
    # opens it again within the grace period and gets the messages sent in between.
    import http.client

    agent = ListeningAgent(["--state-dir", str(tmp_path)], AGENT_ENV, tmp_path)
    try:
        auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        _, headers, _ = _http(agent.url, body=INITIALIZE, **auth)
        ids = {**auth, "Acp-Connection-Id": headers["acp-connection-id"]}
        host, port = agent.origin.removeprefix("http://").split(":")

        def open_stream() -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("GET", "/acp", headers={**ids, "Accept": "text/event-stream"})
            response = connection.getresponse()
            assert response.status == 200
            return connection, response

        open_stream()[0].close()  # cut
        new_session = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path)}}
        new_session["params"]["mcpServers"] = []
        assert _http(agent.url, body=json.dumps(new_session).encode(), **ids)[0] == 202
        stream, response = open_stream()
        # The body's raw lines (chunk sizes among them): the buffer the headers were read from.
        assert response.fp is not None
        while not (line := response.fp.readline()).startswith(b"data: "):
            pass
        assert json.loads(line[6:])["result"]["sessionId"]
        response.close()
        stream.close()
    finally:
        assert agent.stop() == 0, agent.log

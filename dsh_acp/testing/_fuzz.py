"""Fuzzing a real agent process over its stdio: seeded frames in, every line out checked.

``FrameGenerator`` makes the frames: valid ACP requests and notifications (to sessions the agent
really opened), the same messages mutated (a field replaced by a wrong type, deep nesting or a huge
value, a byte flipped, the line cut short or split), responses to requests the agent never made,
and plain garbage (random bytes, invalid UTF-8, blank lines). ``fuzz_agent`` writes them to the
agent while reading everything it writes: each line must be UTF-8 JSON that the ACP schema accepts
(and that real clients accept, ``wire_problems``); a probe request every so often must be answered
in time (else a hang); the agent must not exit before its input ends, and must then exit 0.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import orjson

from dsh_acp.acp._session_methods import AGENT_METHODS

from ._checks import wire_problems
from ._child_signal import ChildSignal
from ._schema import AcpSchema, SchemaViolation

__all__ = ["FrameGenerator", "FuzzReport", "fuzz_agent"]

_PROBE_PREFIX = "fuzz-probe-"
# The agent's own method table, in a fixed order so a seed always draws the same frames, plus an
# unknown method and an unknown extension.
_METHODS = (*sorted(AGENT_METHODS), "nope/nope", "_x/ext")
_WEIGHTS = {
    "authenticate": 3,
    "logout": 3,
    "session/close": 2,
    "session/fork": 2,
    "session/list": 2,
    "session/load": 20,
    "session/prompt": 2,
    "session/resume": 2,
}
"""How often each method is drawn, against 1 for the others (a method added later is drawn too)."""


def _deep(rng: random.Random) -> Any:
    depth = rng.choice((64, 200, 255, 256, 600, 1000))
    value: Any = rng.choice((1, "x", None, {}))
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"a": value}
    return value


def _wild(rng: random.Random) -> Any:
    """A JSON value of a shape nobody expects."""
    pick = rng.randrange(12)
    if pick == 0:
        return _deep(rng)
    if pick == 1:
        return "w" * rng.choice((0, 1, 300, 70_000, 1_000_000))
    if pick == 2:
        return rng.choice((0, -1, 2**31, 2**63 - 1, -(2**63), 1.5, -0.0, 1e308))
    if pick == 3:
        return rng.choice((True, False, None))
    if pick == 4:
        return [rng.randrange(100) for _ in range(rng.choice((0, 3, 5000)))]
    if pick == 5:
        return {f"k{i}": i for i in range(rng.choice((0, 3, 2000)))}
    if pick == 6:
        odd = (0, 7, 10, 13, 0x7F, 0x85, 0x2028, 0xFEFF, 0x1F600)
        return "".join(chr(rng.choice(odd)) for _ in range(20))
    if pick == 7:
        return "/" + "/".join([".."] * rng.randrange(5)) + "/x"
    if pick == 8:
        return {"type": rng.choice(("text", "image", "resource", "resource_link", "audio", "x")), "text": 3}
    if pick == 9:
        return [{"type": "text", "text": "t" * rng.choice((1, 100_000))}]
    if pick == 10:
        return "sess-" + str(rng.randrange(10))
    return rng.choice(("", "default", "plan", "bypass", "model", "mode", "\x00"))


class FrameGenerator:
    """Seeded frames for one agent; ``learn`` feeds it what the agent answered (session ids)."""

    def __init__(self, rng: random.Random, cwd: str) -> None:
        self.rng = rng
        self.cwd = cwd
        self.sessions: list[str] = []
        self.agent_requests: list[Any] = []  # ids of requests the agent sent us, to answer
        self._next_id = 0

    def learn(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        result = message.get("result")
        if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            self.sessions.append(result["sessionId"])
            del self.sessions[:-20]
        if "method" in message and "id" in message:
            self.agent_requests.append(message["id"])

    def _id(self) -> int | str:
        self._next_id += 1
        return self._next_id if self.rng.random() < 0.8 else f"s{self._next_id}"

    def _session(self) -> str:
        if self.sessions and self.rng.random() < 0.85:
            return self.rng.choice(self.sessions)
        return _wild(self.rng) if self.rng.random() < 0.3 else "unknown-session"

    def _params(self, method: str) -> Any:
        rng = self.rng
        session = self._session()
        text = rng.choice(("hi", "/compact", "/mode plan", "/model x", "/tools", "go on", "é" * 50))
        table: dict[str, Any] = {
            "initialize": {
                "protocolVersion": rng.choice((1, 1, 1, 0, 2, 65535, "1")),
                "clientCapabilities": rng.choice(
                    (
                        {},
                        {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
                        {"_meta": {"terminal_output": True}},
                    )
                ),
            },
            "authenticate": {"methodId": rng.choice(("api-key", "x"))},
            "session/new": {"cwd": self.cwd, "mcpServers": []},
            "session/load": {"sessionId": session, "cwd": self.cwd, "mcpServers": []},
            "session/resume": {"sessionId": session, "cwd": self.cwd, "mcpServers": []},
            "session/fork": {"sessionId": session, "cwd": self.cwd, "mcpServers": []},
            "session/list": rng.choice(({}, {"cwd": self.cwd}, {"cursor": "50"})),
            "session/prompt": {"sessionId": session, "prompt": [{"type": "text", "text": text}]},
            "session/close": {"sessionId": session},
            "session/set_mode": {"sessionId": session, "modeId": rng.choice(("default", "plan", "x"))},
            "session/set_config_option": {
                "sessionId": session,
                "configId": rng.choice(("mode", "model", "x")),
                "value": rng.choice(("plan", "default", True)),
            },
            "session/delete": {"sessionId": session},
            "logout": {},
        }
        return table.get(method, {})

    def valid(self) -> dict[str, Any]:
        """A well-formed message (not always a sensible one)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.08:
            return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self._session()}}
        if roll < 0.12:
            params = {"requestId": rng.randrange(50)}
            return {"jsonrpc": "2.0", "method": "$/cancel_request", "params": params}
        if roll < 0.2 and self.agent_requests:
            request_id = self.agent_requests.pop(0)
            outcome = rng.choice(
                (
                    {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    {"outcome": {"outcome": "selected", "optionId": "reject_once"}},
                    {"outcome": {"outcome": "cancelled"}},
                    {"outcome": _wild(rng)},
                    {},
                )
            )
            if rng.random() < 0.2:
                return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": "no"}}
            return {"jsonrpc": "2.0", "id": request_id, "result": outcome}
        if roll < 0.22:
            return {"jsonrpc": "2.0", "id": rng.choice((None, 10**6, "zz")), "result": _wild(rng)}
        if roll < 0.24:
            error = {"code": rng.choice((-32603, 1)), "message": "x", "data": _wild(rng)}
            return {"jsonrpc": "2.0", "id": rng.choice((None, 10**6, "w" * 100_000)), "error": error}
        method = rng.choices(_METHODS, [_WEIGHTS.get(name, 1) for name in _METHODS])[0]
        return {"jsonrpc": "2.0", "id": self._id(), "method": method, "params": self._params(method)}

    def mutate(self, message: dict[str, Any]) -> bytes:
        """A valid message made invalid: in its fields, or in its bytes once encoded."""
        pick = self.rng.randrange(len(_FIELD_MUTATIONS) + len(_BYTE_MUTATIONS))
        if pick < len(_FIELD_MUTATIONS):
            _FIELD_MUTATIONS[pick](message, self.rng)
            return _dumps(message)
        return _BYTE_MUTATIONS[pick - len(_FIELD_MUTATIONS)](_dumps(message), self.rng)

    def garbage(self) -> bytes:
        rng = self.rng
        pick = rng.randrange(5)
        if pick == 0:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b"")
        if pick == 1:
            return rng.choice((b"", b"   ", b"\r", b"\t\t"))
        if pick == 2:
            return b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe' + b"\x80" * rng.randrange(5) + b'"}'
        if pick == 3:
            return rng.choice((b"[]", b"[1,2]", b"null", b"42", b'"x"', b"{}", b"[" * 2000))
        return b"{" * rng.randrange(1, 3000)

    def frame(self) -> bytes:
        """One line of input (without its newline)."""
        roll = self.rng.random()
        if roll < 0.45:
            return _dumps(self.valid())
        if roll < 0.85:
            return self.mutate(self.valid())
        return self.garbage()


def _wrong_shape(message: dict[str, Any], rng: random.Random) -> None:
    """A field (of the params, mostly) replaced by something of the wrong shape."""
    target = message
    params = message.get("params")
    if isinstance(params, dict) and params and rng.random() < 0.7:
        target = params
    if target:
        target[rng.choice(list(target))] = _wild(rng)


def _field_removed(message: dict[str, Any], rng: random.Random) -> None:
    if message:
        del message[rng.choice(list(message))]


def _id_replaced(message: dict[str, Any], rng: random.Random) -> None:
    message["id"] = _wild(rng)


def _params_replaced(message: dict[str, Any], rng: random.Random) -> None:
    message["params"] = _wild(rng)


def _bytes_flipped(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    raw = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw).replace(b"\n", b" ")


def _cut_short(data: bytes, rng: random.Random) -> bytes:
    """The rest of the line lost."""
    return data[: rng.randrange(1, len(data))] if len(data) > 2 else data


def _stray_newline(data: bytes, rng: random.Random) -> bytes:
    if len(data) <= 2:
        return data
    cut = rng.randrange(1, len(data))
    return data[:cut] + b"\n" + data[cut:]


def _key_repeated(data: bytes, rng: random.Random) -> bytes:
    """A second copy of a key (the last one wins in most parsers)."""
    return data[:-1] + b',"jsonrpc":"1.0"}' if data.endswith(b"}") else data


_FIELD_MUTATIONS: Final[tuple[Callable[[dict[str, Any], random.Random], None], ...]] = (
    _wrong_shape,
    _field_removed,
    _id_replaced,
    _params_replaced,
)
_BYTE_MUTATIONS: Final[tuple[Callable[[bytes, random.Random], bytes], ...]] = (
    _bytes_flipped,
    _cut_short,
    _stray_newline,
    _key_repeated,
)


def _dumps(message: Any) -> bytes:
    try:
        return orjson.dumps(message)
    except TypeError:  # deeper than the encoder goes: write it by hand
        return b"[" * 300 + b"]" * 300


@dataclass
class FuzzReport:
    """What a fuzz run found; ``ok`` when there was no crash, hang or invalid line."""

    frames: int = 0
    input_bytes: int = 0
    output_lines: int = 0
    stderr_bytes: int = 0
    internal_errors: int = 0
    """Answers of -32603 "Internal error" (a bug's symptom, though not a crash)."""
    hangs: int = 0
    crash: str | None = None
    invalid: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.crash is None and self.hangs == 0 and not self.invalid

    def summary(self) -> str:
        per_mb = self.stderr_bytes / max(self.input_bytes / 1e6, 1e-9)
        return (
            f"{self.frames} frames ({self.input_bytes / 1e6:.1f} MB) in {self.seconds:.1f} s: "
            f"{'crash: ' + self.crash if self.crash else 'no crash'}, {self.hangs} hangs, "
            f"{len(self.invalid)} invalid lines, {self.output_lines} lines out, "
            f"{self.internal_errors} internal errors, {self.stderr_bytes} bytes of stderr "
            f"({per_mb:.0f} per MB of input)"
        )


async def fuzz_agent(
    command: Sequence[str],
    *,
    schema: AcpSchema,
    cwd: str,
    frames: int,
    seed: int = 0,
    batch: int = 50,
    probe_timeout: float = 20.0,
    env: dict[str, str] | None = None,
    progress: Callable[[FuzzReport], None] | None = None,
) -> FuzzReport:
    """Feed ``frames`` seeded frames to the agent ``command`` and check all it writes."""
    rng = random.Random(seed)
    generator = FrameGenerator(rng, cwd)
    report = FuzzReport()
    methods: dict[Any, list[str]] = {}  # request ids we sent, and the methods sent with them
    protocols = [1, 2]  # the ACP versions a line may be of, the one the connection speaks first
    answered: dict[str, anyio.Event] = {}
    started = time.monotonic()
    process = await anyio.open_process(list(command), env=env, cwd=cwd)
    kill = ChildSignal(process)  # not process.kill(): it may take the exit from asyncio's watcher
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

    def check(raw: bytes) -> None:
        report.output_lines += 1
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as decode_error:
            report.invalid.append(f"not JSON ({decode_error}): {raw[:200]!r}")
            return
        generator.learn(message)
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(request_id, str) and request_id in answered:
            answered.pop(request_id).set()
            return
        error = message.get("error") if isinstance(message, dict) else None
        if isinstance(error, dict) and error.get("message") == "Internal error":
            report.internal_errors += 1
        is_result = "method" not in message and "result" in message
        candidates: list[str | None] = list(methods.get(request_id, [])) if is_result else []
        if is_result and "initialize" in candidates and isinstance(message["result"], dict):
            version = message["result"].get("protocolVersion")
            if version in protocols:
                protocols.remove(version)
                protocols.insert(0, version)
        problems = []
        # The connection speaks the version its last initialize chose; a session made before a
        # second initialize keeps the version it was made in.
        for protocol, method in ((p, m) for p in protocols for m in candidates or [None]):
            try:
                schema.for_protocol(protocol).validate_agent_message(message, method)
                break
            except SchemaViolation as violation:
                problems.append(str(violation))
        else:
            report.invalid.append(f"{problems[0][:300]} in {raw[:200]!r}")
        report.invalid.extend(f"{problem}: {raw[:200]!r}" for problem in wire_problems(message))

    async def read_stdout() -> None:
        buffer = b""
        async for chunk in stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                check(line)
        if buffer:
            report.invalid.append(f"the last line has no newline: {buffer[-200:]!r}")

    async def read_stderr() -> None:
        async for chunk in stderr:
            report.stderr_bytes += len(chunk)

    async def probe(number: int) -> None:
        probe_id = f"{_PROBE_PREFIX}{number}"
        event = answered[probe_id] = anyio.Event()
        message = {"jsonrpc": "2.0", "id": probe_id, "method": "session/list", "params": {}}
        # A newline first: the frame before may have been cut short on purpose.
        await stdin.send(b"\n" + orjson.dumps(message) + b"\n")
        with anyio.move_on_after(probe_timeout) as scope:
            await event.wait()
        if scope.cancelled_caught:
            report.hangs += 1

    async def write() -> None:
        sent = 0
        while sent < frames:
            chunk = bytearray()
            for _ in range(min(batch, frames - sent)):
                frame = generator.frame()
                try:
                    message = orjson.loads(frame)
                except orjson.JSONDecodeError:
                    message = None
                if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message:
                    key = message["id"]
                    if isinstance(key, int | str) and not isinstance(key, bool):
                        methods.setdefault(key, []).append(message["method"])
                chunk += frame + b"\n"
                sent += 1
            report.frames = sent
            report.input_bytes += len(chunk)
            if process.returncode is not None:
                report.crash = f"the agent exited ({process.returncode}) after {sent} frames"
                return
            try:
                await stdin.send(bytes(chunk))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                report.crash = f"the agent stopped reading after {sent} frames"
                return
            await probe(sent)
            if progress is not None:
                progress(report)
            if report.hangs:
                return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_stdout)
            group.start_soon(read_stderr)
            await write()
            if report.crash is None:
                await probe(-1)
            await stdin.aclose()
            with anyio.move_on_after(15) as scope:
                code = await process.wait()
            if scope.cancelled_caught:
                report.hangs += 1
                report.crash = report.crash or "the agent did not exit after its input ended"
                kill.kill()
            elif code != 0 and report.crash is None:
                report.crash = f"the agent exited {code} at the end"
    finally:
        kill.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()
        kill.close()
    report.seconds = time.monotonic() - started
    return report

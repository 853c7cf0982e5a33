// Drives dsh-acp with the official ACP TypeScript SDK's experimental v2 client
// (`@agentclientprotocol/sdk/experimental/v2`, the stable features of the v2 draft) as the editor,
// and prints one JSON document with what the SDK handed to the client app and the raw transcript
// of both directions. tests/test_official_client_v2.py asserts on it.
//
//   node drive_v2.mjs --python PY --workspace DIR --state-dir DIR --script MODEL.json [--timeout-ms N]
//
// One session, as a user would have it: a prompt whose script plans, reads, edits (asking first)
// and runs a command (asking first), read with the SDK's active-session helper until the turn's
// idle state update; the session closed and the agent ended; a second agent over the same state
// resuming it with its replay from the start, then a second prompt, then the history list.

import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";

import * as acp from "@agentclientprotocol/sdk/experimental/v2";

import { startAgent } from "./agent_process.mjs";

const { values: args } = parseArgs({
  options: {
    python: { type: "string" },
    workspace: { type: "string" },
    "state-dir": { type: "string" },
    script: { type: "string" },
    "timeout-ms": { type: "string", default: "20000" },
  },
});
for (const name of ["python", "workspace", "state-dir", "script"]) {
  if (!args[name]) {
    console.error(`drive_v2.mjs: --${name} is required`);
    process.exit(2);
  }
}
const workspace = path.resolve(args.workspace);
const stateDir = path.resolve(args["state-dir"]);

// The SDK reports what it could not parse or handle only through console.error.
const sdkErrors = [];
const originalError = console.error;
console.error = (...parts) => {
  sdkErrors.push(parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" "));
  originalError(...parts);
};

const transcript = []; // {dir: "agent" | "client", message, run}
const events = []; // what the SDK handed to the app, in arrival order
const record = (kind, data) => {
  events.push({ seq: events.length, transcriptIndex: transcript.length, kind, ...data });
};
const calls = []; // every request the editor made, with the result the SDK returned
const output = { events, transcript, calls, sdkErrors, runs: [] };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

await mkdir(stateDir, { recursive: true });
const script = (await readFile(args.script, "utf8")).replaceAll("{{cwd}}", workspace);
const modelPath = path.join(stateDir, "model.json");
await writeFile(modelPath, script);

const app = acp
  .client({ name: "dsh-acp official v2 client test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    record("session_update", { params });
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    record("request_permission", { params });
    await sleep(100); // a user reads the question: a call must not run meanwhile
    const option = params.options.find((candidate) => candidate.kind === "allow_once");
    if (!option) throw new Error(`no allow_once option in ${JSON.stringify(params.options)}`);
    const answer = { outcome: { outcome: "selected", optionId: option.optionId } };
    record("permission_answer", { answer });
    return answer;
  });

const call = async (agent, method, params) => {
  const result = await agent.request(method, params);
  calls.push({ method, params, result });
  return result;
};

// Everything the active session hands over, up to and with the stop message of an idle update.
const untilIdle = async (session) => {
  const read = [];
  for (;;) {
    const message = await session.nextUpdate();
    read.push({ kind: message.kind, update: message.update, stopReason: message.stopReason ?? null });
    if (message.kind === "stop") return read;
  }
};

const initialize = (agent) =>
  call(agent, acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "dsh-acp-v2-test", title: "A v2 client", version: "1.0.0" },
    capabilities: {},
  });

// One agent process, one connection; the editor ends it by closing its stdin.
async function withAgent(run, op) {
  const agentProcess = startAgent({
    python: args.python,
    args: ["--model", `script:${modelPath}`, "--state-dir", stateDir, "--mode", "default"],
    cwd: workspace,
    transcript,
  });
  output.runs.push({ run, startsAt: transcript.length });
  try {
    await app.connectWith(acp.ndJsonStream(agentProcess.input, agentProcess.output), op);
    agentProcess.child.stdin.end();
    const exit = await Promise.race([agentProcess.exited, sleep(5000).then(() => ({ stillRunning: true }))]);
    output.runs.at(-1).exit = exit;
  } finally {
    output.runs.at(-1).stderr = agentProcess.stderr();
    if (agentProcess.child.exitCode === null && agentProcess.child.signalCode === null) {
      agentProcess.child.kill("SIGKILL");
    }
  }
}

let timer;
const timeout = new Promise((_, reject) => {
  timer = setTimeout(() => reject(new Error(`timed out after ${args["timeout-ms"]} ms`)), Number(args["timeout-ms"]));
});

async function scenario() {
  await withAgent("first", async (agent) => {
    output.initialize = await initialize(agent);
    const session = await agent.buildSession(workspace).start();
    output.newSession = session.newSessionResponse;
    calls.push({ method: "session/new", params: { cwd: workspace, mcpServers: [] }, result: session.newSessionResponse });
    output.prompt = await session.prompt("Fix add and test it");
    calls.push({ method: "session/prompt", result: output.prompt });
    output.firstTurn = await untilIdle(session);
    session.dispose();
    output.closed = await call(agent, acp.methods.agent.session.close, { sessionId: session.sessionId });
  });
  await withAgent("second", async (agent) => {
    await initialize(agent);
    const sessionId = output.newSession.sessionId;
    output.resumedAt = transcript.length;
    output.resumed = await call(agent, acp.methods.agent.session.resume, {
      sessionId,
      cwd: workspace,
      replayFrom: { type: "start" },
    });
    const session = agent.attachSession({ sessionId, ...output.resumed });
    output.secondPrompt = await session.prompt("Thanks");
    calls.push({ method: "session/prompt", result: output.secondPrompt });
    output.secondTurn = await untilIdle(session);
    session.dispose();
    output.listed = await call(agent, acp.methods.agent.session.list, { cwd: workspace });
  });
}

try {
  await Promise.race([timeout, scenario()]);
} catch (error) {
  output.error = String(error?.stack ?? error);
} finally {
  clearTimeout(timer);
}
// Exit once the whole document is written: a pipe takes it in pieces.
process.stdout.write(JSON.stringify(output, null, 2) + "\n", () => process.exit(output.error ? 1 : 0));

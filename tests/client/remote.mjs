// Drives a running `dsh-acp --listen` with the official ACP TypeScript SDK's network client
// transports (Streamable HTTP and WebSocket), as several editors at once, and prints one JSON
// document of what each client saw. tests/test_remote.py starts the agent and asserts on it.
//
//   node remote.mjs --url URL --token TOKEN --workspace DIR --scenario S
//                   [--transport http|websocket] [--timeout-ms N]
//
// Scenario `concurrent`: client A over Streamable HTTP and client B over WebSocket each open a
// session and prompt at the same time (each answers its own permission request); B then tries to
// load A's session while A is connected, and again once A has closed, and prompts it.
// Scenario `reconnect`: client A (over --transport) starts a turn whose command runs for a
// minute, and its connection drops once the command runs (the socket destroyed, no goodbye);
// client B connects, initializes, loads the session and prompts it again.
// Scenario `vanish`: client A starts the same turn and its process exits once the command runs,
// never to come back (the test watches the agent cancel the turn after the grace period).

import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    token: { type: "string" },
    workspace: { type: "string" },
    scenario: { type: "string" },
    transport: { type: "string", default: "http" },
    "timeout-ms": { type: "string", default: "20000" },
  },
});
for (const name of ["url", "token", "workspace", "scenario"]) {
  if (!args[name]) {
    console.error(`remote.mjs: --${name} is required`);
    process.exit(2);
  }
}
const workspace = path.resolve(args.workspace);
const pidFile = path.join(workspace, "sleep.pid");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const sdkErrors = [];
const originalError = console.error;
console.error = (...parts) => {
  sdkErrors.push(parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" "));
  originalError(...parts);
};

// One client: its own transport connection to the agent, and what the SDK handed its app.
// `drop()` destroys the transport without a goodbye (a socket destroyed, requests aborted), as a
// network failure would; `close()` ends it as an editor does.
function open(name, transport) {
  const client = { name, transport, updates: [], permissions: [] };
  const headers = { Authorization: `Bearer ${args.token}` };
  let stream;
  let drop;
  if (transport === "websocket") {
    let socket;
    class TrackedWebSocket extends WebSocket {
      constructor(...rest) {
        super(...rest);
        socket = this;
      }
    }
    stream = createWebSocketStream(args.url, { headers, WebSocket: TrackedWebSocket });
    drop = () => socket.terminate();
  } else {
    const controllers = new Set();
    let dropped = false;
    const fetchImpl = (input, init = {}) => {
      if (dropped) return Promise.reject(new Error("dropped"));
      const controller = new AbortController();
      controllers.add(controller);
      const signal = init.signal ? AbortSignal.any([init.signal, controller.signal]) : controller.signal;
      return fetch(input, { ...init, signal });
    };
    stream = createHttpStream(args.url, { headers, fetch: fetchImpl });
    drop = () => {
      dropped = true;
      for (const controller of controllers) controller.abort();
    };
  }
  const app = acp
    .client({ name: `remote test ${name}` })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      client.updates.push(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      client.permissions.push(params);
      const option = params.options.find((candidate) => candidate.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    });
  let finish;
  const finished = new Promise((resolve) => {
    finish = resolve;
  });
  let ready;
  client.agent = new Promise((resolve) => {
    ready = resolve;
  });
  const done = app
    .connectWith(stream, async (agent) => {
      ready(agent);
      await finished;
    })
    .catch((error) => {
      client.connectionError = String(error);
    });
  client.close = async () => {
    finish();
    await done;
  };
  client.drop = drop;
  return client;
}

const initialize = (agent, name) =>
  agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { _meta: { terminal_output: true } },
    clientInfo: { name, version: "1.0.0" },
  });
const newSession = (agent) => agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
const prompt = (agent, sessionId, text) =>
  agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
const load = (agent, sessionId) =>
  agent.request(acp.methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] });
const settle = async (promise) => {
  try {
    return { result: await promise };
  } catch (error) {
    return { error: { message: String(error?.message ?? error), data: error?.data ?? null } };
  }
};
const view = (client) => ({
  name: client.name,
  transport: client.transport,
  updates: client.updates,
  permissions: client.permissions,
  connectionError: client.connectionError ?? null,
});
const waitFor = async (condition, what) => {
  const deadline = Date.now() + 15000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
};

const scenarios = {
  async concurrent(output) {
    const a = open("A", "http");
    const b = open("B", "websocket");
    const [agentA, agentB] = await Promise.all([a.agent, b.agent]);
    await Promise.all([initialize(agentA, "client A"), initialize(agentB, "client B")]);
    const [sessionA, sessionB] = await Promise.all([newSession(agentA), newSession(agentB)]);
    output.sessions = { A: sessionA.sessionId, B: sessionB.sessionId };
    output.prompts = await Promise.all([
      prompt(agentA, sessionA.sessionId, "Say hello from A"),
      prompt(agentB, sessionB.sessionId, "Say hello from B"),
    ]);
    // A is still connected: B may not take its session.
    output.loadWhileHeld = await settle(load(agentB, sessionA.sessionId));
    await a.close();
    await sleep(200); // the agent reads the connection's end
    const before = (output.updatesBeforeLoad = b.updates.length);
    output.loadAfterClose = await settle(load(agentB, sessionA.sessionId));
    output.replayed = b.updates.slice(before);
    output.promptAfterLoad = await settle(prompt(agentB, sessionA.sessionId, "Once more"));
    await b.close();
    output.clients = [view(a), view(b)];
  },

  async reconnect(output) {
    const a = open("A", args.transport);
    const agentA = await a.agent;
    await initialize(agentA, "client A");
    const { sessionId } = await newSession(agentA);
    output.sessionId = sessionId;
    const running = settle(prompt(agentA, sessionId, "Watch the logs"));
    await waitFor(() => existsSync(pidFile), "the command to start");
    output.dropped = Date.now();
    a.drop();
    const b = open("B", args.transport);
    const agentB = await b.agent;
    await initialize(agentB, "client B");
    const started = Date.now();
    output.load = await settle(load(agentB, sessionId));
    output.loadMs = Date.now() - started;
    output.sinceDropMs = Date.now() - output.dropped;
    await sleep(100); // the replay and the answer may come on two streams: let both arrive
    output.replayed = [...b.updates];
    output.promptAfterLoad = await settle(prompt(agentB, sessionId, "Are you back?"));
    await b.close();
    output.firstPrompt = await Promise.race([running, sleep(1000).then(() => "unanswered")]);
    output.clients = [view(a), view(b)];
  },

  async vanish(output) {
    const a = open("A", args.transport);
    const agentA = await a.agent;
    await initialize(agentA, "client A");
    const { sessionId } = await newSession(agentA);
    output.sessionId = sessionId;
    void prompt(agentA, sessionId, "Watch the logs").catch(() => {});
    await waitFor(() => existsSync(pidFile), "the command to start");
    output.clients = [view(a)];
    output.exit = true; // gone: no close, no DELETE, the process ends with its sockets open
  },
};

if (!(args.scenario in scenarios)) {
  console.error(`remote.mjs: unknown --scenario ${args.scenario}`);
  process.exit(2);
}
const output = { scenario: args.scenario, sdkErrors };
let timer;
try {
  await Promise.race([
    scenarios[args.scenario](output),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${args["timeout-ms"]} ms`)), Number(args["timeout-ms"]));
    }),
  ]);
} catch (error) {
  output.error = String(error?.stack ?? error);
} finally {
  clearTimeout(timer);
}
process.stdout.write(JSON.stringify(output, null, 2) + "\n", () => process.exit(output.error ? 1 : 0));

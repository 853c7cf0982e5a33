// Drives dsh-acp with the official ACP TypeScript SDK acting as the editor (Zed's capabilities),
// and prints one JSON document with everything the SDK handed to the client app, plus the raw
// transcript of both directions. tests/test_official_client.py asserts on that document.
//
//   node drive.mjs --python PY --workspace DIR --state-dir DIR
//                  (--script MODEL.json | --model openai:NAME --base-url URL)
//                  [--scenario tools|editor|features|terminals|real_model|fork] [--timeout-ms N]
//   node drive.mjs --connect URL --transport http|websocket --token TOKEN --workspace DIR [...]
//
// With --connect the driver spawns nothing: it reaches a running `dsh-acp --listen` over the SDK's
// Streamable HTTP or WebSocket client transport (the transcript is then taken at the message level).
//
// With --script the agent plays a scripted model; with --model and --base-url it talks to an
// OpenAI-compatible server (the test's fake one, tests/fake_openai.py), as with a real model.
//
// Scenario `tools` (the default) sends one prompt whose script runs the reference tools (cards,
// terminal, permissions, fs/*). Scenario `editor` is what an editor draws besides tool cards: the
// model and mode pickers (configOptions) changed from both pickers, the `/` menu and its commands,
// the live plan, the session title (also in session/list) and the context usage meter. Scenario
// `features` is what users ask every agent for: prompts queued while a turn runs (and cancelled
// with it), questions to the user (elicitation), notices, and session housekeeping.
// `terminals` is a client that offers terminals (terminal: true, no _meta convention, like Toad or
// acpx) and serves terminal/* with real subprocesses: one prompt runs commands that print, fail,
// and a `sleep 30` this client cancels once its terminal shows up in the card. `real_model` is
// what only a real model gives: the reasoning-effort picker, the meter's cost, the title the
// model writes, and logout. `fork` branches a conversation with `session/fork` (the SDK's unstable
// v1 client) and loads both branches.
//
// The SDK parses leniently (unknown keys are stripped, an invalid field value falls back to its
// default, an invalid content block is skipped, an unparsable message is only logged), so this
// driver records both what the SDK parsed and the raw lines of both directions, and captures the
// SDK's own complaints (console.error): the test can tell "accepted" from "understood".

import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";

import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

import { startAgent } from "./agent_process.mjs";

const { values: args } = parseArgs({
  options: {
    python: { type: "string" },
    workspace: { type: "string" },
    "state-dir": { type: "string" },
    script: { type: "string" },
    model: { type: "string" },
    "base-url": { type: "string" },
    scenario: { type: "string", default: "tools" },
    "timeout-ms": { type: "string", default: "15000" },
    connect: { type: "string" },
    transport: { type: "string", default: "http" },
    token: { type: "string" },
  },
});
const required = args.connect
  ? ["workspace", "token"]
  : ["python", "workspace", "state-dir", ...(args.model ? ["base-url"] : ["script"])];
for (const name of required) {
  if (!args[name]) {
    console.error(`drive.mjs: --${name} is required`);
    process.exit(2);
  }
}
if (!["tools", "editor", "features", "terminals", "real_model", "fork"].includes(args.scenario)) {
  console.error(`drive.mjs: unknown --scenario ${args.scenario}`);
  process.exit(2);
}
// `session/fork` is an unstable v1 method: that scenario's client is the SDK's full v1 (its
// `/unstable` entrypoint, used for the whole app as the SDK asks); the others are stable v1.
const acp = await import(args.scenario === "fork" ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk");
const workspace = path.resolve(args.workspace);

// The SDK reports messages it could not parse or handle only through console.error; keep them so
// the test can require that there were none.
const sdkErrors = [];
const originalError = console.error;
console.error = (...parts) => {
  sdkErrors.push(parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" "));
  originalError(...parts);
};

// One ordered log of everything, so the test can check causality (a permission request after the
// call's announcement, `in_progress` only after the answer went out).
const transcript = []; // {dir: "agent" | "client", message}
const events = []; // what the SDK handed to the app, in arrival order
const record = (kind, data) => {
  const event = { seq: events.length, transcriptIndex: transcript.length, kind, ...data };
  events.push(event);
  return event;
};

// The agent as a child process on stdio (the default), or none with --connect.
const agentArgs = async () => {
  const stateDir = path.resolve(args["state-dir"]);
  await mkdir(stateDir, { recursive: true });
  let model = ["--model", args.model, "--base-url", args["base-url"]];
  if (!args.model) {
    // The scripted model names files by absolute path: `{{cwd}}` is the workspace (as in the golden kit).
    const script = (await readFile(args.script, "utf8")).replaceAll("{{cwd}}", workspace);
    const modelPath = path.join(stateDir, "model.json");
    await writeFile(modelPath, script);
    model = ["--model", `script:${modelPath}`];
  }
  return [...model, "--state-dir", stateDir, "--mode", "default"];
};
const agentProcess = args.connect
  ? null
  : startAgent({ python: args.python, args: await agentArgs(), cwd: workspace, transcript });
const child = agentProcess?.child ?? null;
const exited = agentProcess?.exited;
const agentIn = agentProcess?.input;
const agentOut = agentProcess?.output;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Zed answers fs/* from its buffers; here the buffers are the files on disk, so what the agent
// writes through the client really lands in the workspace.
const app = acp
  .client({ name: "dsh-acp official client test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    record("session_update", { params });
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    record("request_permission", { params });
    // Wait a little before answering, as a user would: an agent that does not wait for the answer
    // would show it by moving the call to in_progress during this pause.
    await sleep(100);
    const option = params.options.find((candidate) => candidate.kind === "allow_once");
    if (!option) throw new Error(`no allow_once option in ${JSON.stringify(params.options)}`);
    const answer = { outcome: { outcome: "selected", optionId: option.optionId } };
    record("permission_answer", { toolCallId: params.toolCall.toolCallId, answer });
    return answer;
  })
  .onRequest(acp.methods.client.elicitation.create, async ({ params }) => {
    record("elicitation", { params });
    await sleep(100); // the user reads the question
    const answer = { action: "accept", content: { answer: params.requestedSchema.properties.answer.enum[0] } };
    record("elicitation_answer", { answer });
    return answer;
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    record("read_text_file", { params });
    let text;
    try {
      text = await readFile(params.path, "utf8");
    } catch (error) {
      // Like an editor asked for a file it has no buffer for and that is not on disk: the
      // protocol's "resource not found", which the agent takes as "the file does not exist yet".
      if (error.code === "ENOENT") throw acp.RequestError.resourceNotFound(params.path);
      throw error;
    }
    if (params.line == null && params.limit == null) return { content: text };
    const lines = text.split(/(?<=\n)/);
    const start = Math.max((params.line ?? 1) - 1, 0);
    const end = params.limit == null ? lines.length : start + params.limit;
    return { content: lines.slice(start, end).join("") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    record("write_text_file", { params });
    await mkdir(path.dirname(params.path), { recursive: true });
    await writeFile(params.path, params.content);
    return {};
  })
  // Terminals as an editor runs them: a real process per terminal, stdout and stderr in one stream,
  // at most outputByteLimit bytes kept (the newest). Like Toad and acpx, kill stops only the
  // process this client started: whatever that process started is the agent's to stop.
  .onRequest(acp.methods.client.terminal.create, async ({ params }) => {
    record("terminal_create", { params });
    const env = { ...process.env };
    for (const { name, value } of params.env ?? []) env[name] = value;
    const proc = spawn(params.command, params.args ?? [], {
      cwd: params.cwd ?? workspace,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const terminalId = `term-${terminals.size + 1}`;
    const terminal = { proc, chunks: [], size: 0, truncated: false, exit: null, released: false };
    const keep = (chunk) => {
      terminal.chunks.push(chunk);
      terminal.size += chunk.length;
      const limit = params.outputByteLimit;
      while (limit != null && terminal.size > limit && terminal.chunks.length) {
        const first = terminal.chunks[0];
        const excess = terminal.size - limit;
        if (first.length <= excess) {
          terminal.chunks.shift();
          terminal.size -= first.length;
        } else {
          terminal.chunks[0] = first.subarray(excess);
          terminal.size -= excess;
        }
        terminal.truncated = true;
      }
    };
    proc.stdout.on("data", keep);
    proc.stderr.on("data", keep);
    terminal.exited = once(proc, "close").then(([code, signal]) => {
      terminal.exit = { exitCode: code, signal: signal };
      return terminal.exit;
    });
    await once(proc, "spawn");
    terminals.set(terminalId, terminal);
    return { terminalId };
  })
  .onRequest(acp.methods.client.terminal.output, async ({ params }) => {
    record("terminal_output", { params });
    const terminal = terminalFor(params);
    const output = { output: Buffer.concat(terminal.chunks).toString("utf8"), truncated: terminal.truncated };
    if (terminal.exit) output.exitStatus = terminal.exit;
    return output;
  })
  .onRequest(acp.methods.client.terminal.waitForExit, async ({ params }) => {
    record("terminal_wait_for_exit", { params });
    return await terminalFor(params).exited;
  })
  .onRequest(acp.methods.client.terminal.kill, async ({ params }) => {
    record("terminal_kill", { params });
    killGroup(terminalFor(params));
    return {};
  })
  .onRequest(acp.methods.client.terminal.release, async ({ params }) => {
    record("terminal_release", { params });
    const terminal = terminalFor(params);
    killGroup(terminal);
    terminal.released = true;
    return {};
  });

const terminals = new Map();
const terminalFor = (params) => {
  const terminal = terminals.get(params.terminalId);
  if (!terminal || terminal.released) throw acp.RequestError.invalidParams(`no terminal ${params.terminalId}`);
  return terminal;
};
const killGroup = (terminal) => {
  if (terminal.exit) return;
  try {
    terminal.proc.kill("SIGKILL");
  } catch {}
};

const zedCapabilities = {
  fs: { readTextFile: true, writeTextFile: true },
  terminal: true,
  _meta: { terminal_output: true },
};
const zed = { name: "zed", title: "Zed", version: "0.200.0" };

let timer;
const timeout = new Promise((_, reject) => {
  timer = setTimeout(
    () => reject(new Error(`timed out after ${args["timeout-ms"]} ms`)),
    Number(args["timeout-ms"]),
  );
});

// Every request the editor made and the result the SDK handed back. The SDK passes answers through
// unvalidated (some, such as set_mode's, it maps to `{}`): the test compares each result with the
// raw answer on the wire.
const calls = [];
const output = { scenario: args.scenario, events, transcript, calls, sdkErrors };
const call = async (agent, method, params) => {
  const result = await agent.request(method, params);
  calls.push({ method, params, result });
  return result;
};

const scenarios = {
  // A client that offers terminals and no live-output convention: the agent runs bash through
  // terminal/*. The last command (`sleep 30`) is cancelled once the card shows its terminal.
  async terminals(agent) {
    output.initialize = await call(agent, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
      clientInfo: { name: "terminals-client", title: "A client with terminals", version: "1.0.0" },
    });
    output.newSession = await call(agent, acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    const sessionId = output.newSession.sessionId;
    const prompt = call(agent, acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "Run the commands" }],
    });
    // Cancel as a user would, once the sleeping command's terminal is on screen.
    const shown = () =>
      events.some(
        (e) =>
          e.kind === "session_update" &&
          e.params.update.toolCallId === "call-sleep" &&
          (e.params.update.content ?? []).some((block) => block.type === "terminal"),
      );
    while (!shown()) await sleep(20);
    await sleep(300);
    output.cancelledAt = transcript.length;
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    output.prompt = await prompt;
    // A killed process is gone a moment after the signal: give it that moment, no more.
    await Promise.race([Promise.all([...terminals.values()].map((t) => t.exited)), sleep(3000)]);
    output.terminalsLeft = [...terminals.entries()]
      .filter(([, t]) => !t.released || !t.exit)
      .map(([id, t]) => ({ id, released: t.released, exit: t.exit }));
  },

  async tools(agent) {
    output.initialize = await call(agent, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: zedCapabilities,
      clientInfo: zed,
    });
    output.newSession = await call(agent, acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    output.prompt = await call(agent, acp.methods.agent.session.prompt, {
      sessionId: output.newSession.sessionId,
      prompt: [{ type: "text", text: "Run the tests, then fix the greeting." }],
    });
  },

  // One session, in the order a user would produce it: a prompt that plans (plan updates, usage,
  // then the title), both pickers, then each kind of slash command typed into the prompt box, and
  // the history list. Each step waits for its answer, as an editor's UI does.
  async editor(agent) {
    output.initialize = await call(agent, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      // Zed's capabilities plus boolean config options, which the agent offers only when advertised.
      clientCapabilities: { ...zedCapabilities, session: { configOptions: { boolean: {} } } },
      clientInfo: zed,
    });
    output.newSession = await call(agent, acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    const sessionId = output.newSession.sessionId;
    const prompt = (text) =>
      call(agent, acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    await prompt("Plan the greeting fix");
    await call(agent, acp.methods.agent.session.setConfigOption, {
      sessionId,
      configId: "mode",
      value: "accept_edits",
    });
    await call(agent, acp.methods.agent.session.setMode, { sessionId, modeId: "plan" });
    await prompt("/tools");
    await prompt("/mode bypass");
    await prompt("/compact");
    await call(agent, acp.methods.agent.session.list, { cwd: workspace });
  },

  // Prompts typed while a turn runs: the editor sends them at once (the agent advertises
  // promptQueueing) and each is answered in turn; a cancel stops the turn and answers the queue.
  async features(agent) {
    output.initialize = await call(agent, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      // Zed's capabilities plus what these features need the client to show.
      clientCapabilities: { ...zedCapabilities, session: { notices: {} }, elicitation: { form: {} } },
      clientInfo: zed,
    });
    output.newSession = await call(agent, acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    const sessionId = output.newSession.sessionId;
    const prompt = (text) =>
      call(agent, acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    // Sent back to back without waiting: the second and third arrive while the first runs.
    output.queued = await Promise.all([prompt("Start the build"), prompt("Then run the tests"), prompt("Then report")]);
    // The first of these hangs until cancelled; the cancel must also answer the two queued behind it.
    const cancelled = Promise.all([prompt("Watch the logs"), prompt("Then summarize"), prompt("Then clean up")]);
    await sleep(300);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    output.cancelled = await cancelled;
    // The model asks the user (elicitation in form mode); the editor answers with the first choice.
    output.asked = await prompt("Set up the database");
    // /init: the model writes AGENTS.md, asking like any write (allowed once) through the editor.
    output.init = await prompt("/init");
    // A session whose MCP server cannot start: the editor is told with a notice, after the answer.
    output.mcpSession = await call(agent, acp.methods.agent.session.new, {
      cwd: workspace,
      mcpServers: [{ name: "broken", command: path.join(workspace, "no-such-server"), args: [], env: [] }],
    });
    await sleep(300);
    // Prompted once (a command, no model): the history lists only sessions that had a turn.
    output.mcpPrompt = await call(agent, acp.methods.agent.session.prompt, {
      sessionId: output.mcpSession.sessionId,
      prompt: [{ type: "text", text: "/permissions" }],
    });
    // Housekeeping: the history lists both sessions; deleting the second removes it from the list.
    output.listed = await call(agent, acp.methods.agent.session.list, { cwd: workspace });
    output.deleted = await call(agent, acp.methods.agent.session.delete, { sessionId: output.mcpSession.sessionId });
    output.listedAfter = await call(agent, acp.methods.agent.session.list, { cwd: workspace });
  },

  // A conversation branched: one prompt, the session forked, each branch prompted once (the
  // script answers by the number of prompts a conversation has seen), both listed, then both
  // closed and loaded again, each replaying its own history.
  async fork(agent) {
    output.initialize = await call(agent, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: zedCapabilities,
      clientInfo: zed,
    });
    output.newSession = await call(agent, acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    const source = output.newSession.sessionId;
    const prompt = (sessionId, text) =>
      call(agent, acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    await prompt(source, "Remember the number 42");
    output.fork = await call(agent, acp.methods.agent.session.fork, { sessionId: source, cwd: workspace, mcpServers: [] });
    const fork = output.fork.sessionId;
    await prompt(fork, "What was the number?");
    await prompt(source, "Forget it");
    output.listed = await call(agent, acp.methods.agent.session.list, { cwd: workspace });
    for (const sessionId of [fork, source]) {
      await call(agent, acp.methods.agent.session.close, { sessionId });
    }
    output.loadedAt = transcript.length;
    for (const sessionId of [fork, source]) {
      await call(agent, acp.methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] });
    }
  },

  // A real model (an OpenAI-compatible server): the reasoning-effort picker turned up, one prompt
  // whose answer reports usage (the meter, with the session's cost), the title the model writes
  // after that first turn (in the panel and the history list), then logout.
  async real_model(agent) {
    output.initialize = await call(agent, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: zedCapabilities,
      clientInfo: zed,
    });
    output.newSession = await call(agent, acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    const sessionId = output.newSession.sessionId;
    output.effort = await call(agent, acp.methods.agent.session.setConfigOption, {
      sessionId,
      configId: "reasoning_effort",
      value: "high",
    });
    output.prompt = await call(agent, acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "Fix the greeting in src/app.py" }],
    });
    // The title follows the answer (one short request to the model): wait for it as the panel does.
    const titled = () =>
      events.some((e) => e.kind === "session_update" && e.params.update.sessionUpdate === "session_info_update");
    while (!titled()) await sleep(20);
    output.listed = await call(agent, acp.methods.agent.session.list, { cwd: workspace });
    output.logout = await call(agent, acp.methods.agent.logout, {});
  },
};
// Over the network: the SDK's client transport, its messages recorded as they pass (the network
// transports carry messages, not lines).
const networkStream = () => {
  const options = { headers: { Authorization: `Bearer ${args.token}` } };
  const stream =
    args.transport === "websocket"
      ? createWebSocketStream(args.connect, { ...options, WebSocket })
      : createHttpStream(args.connect, options);
  const tap = (dir) =>
    new TransformStream({
      transform(message, controller) {
        transcript.push({ dir, message: structuredClone(message) });
        controller.enqueue(message);
      },
    });
  const outgoing = tap("client");
  void outgoing.readable.pipeTo(stream.writable).catch(() => {});
  return { readable: stream.readable.pipeThrough(tap("agent")), writable: outgoing.writable };
};
try {
  const stream = args.connect ? networkStream() : acp.ndJsonStream(agentIn, agentOut);
  await Promise.race([timeout, app.connectWith(stream, (agent) => scenarios[args.scenario](agent))]);
  if (child) {
    // The editor ends the agent by closing its stdin; the agent must then exit on its own.
    child.stdin.end();
    output.agentExit = await Promise.race([
      exited,
      sleep(5000).then(() => ({ code: null, signal: null, stillRunning: true })),
    ]);
  }
} catch (error) {
  output.error = String(error?.stack ?? error);
} finally {
  clearTimeout(timer);
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  for (const terminal of terminals.values()) killGroup(terminal);
}
output.agentStderr = agentProcess?.stderr() ?? "";
// Exit once the report is out: to a pipe, stdout is written asynchronously, and process.exit
// right after the write cut reports longer than the pipe's 64 KiB.
process.stdout.write(JSON.stringify(output, null, 2) + "\n", () => process.exit(output.error ? 1 : 0));

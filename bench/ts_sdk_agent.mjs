// Baseline for the benchmarks: the same scripted agent, written with the official ACP TypeScript
// SDK (@agentclientprotocol/sdk, the copy tests/client installs with `npm ci`).
//
//   node bench/ts_sdk_agent.mjs [--script PATH]
//
// It plays the scripted-model file format of `dsh-acp --model script:PATH` (only `text` steps: the
// n-th prompt of a session plays turn n, each string of a step's `text` one agent_message_chunk
// sharing a messageId), as bench/sdk_agent.py does with the Python SDK, written the way the SDK's
// README shows an agent: `agent({ name })`, `onRequest(methods.agent.…)`, `connect(ndJsonStream)`.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "tests", "client", "package.json"));
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);

const { values } = parseArgs({ options: { script: { type: "string" } } });
const turns = values.script ? JSON.parse(readFileSync(values.script, "utf8")).turns : [];
const prompts = new Map();

const app = acp
  .agent({ name: "ts-sdk-bench-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {},
    agentInfo: { name: "ts-sdk-bench-agent", title: "TS SDK bench agent", version: "0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = randomUUID().replaceAll("-", "");
    prompts.set(sessionId, 0);
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const index = prompts.get(params.sessionId) ?? 0;
    prompts.set(params.sessionId, index + 1);
    for (const step of turns[index] ?? []) {
      const text = step.text ?? [];
      const messageId = randomUUID();
      for (const chunk of typeof text === "string" ? [text] : text) {
        await client.notify(acp.methods.client.session.update, {
          sessionId: params.sessionId,
          update: {
            sessionUpdate: "agent_message_chunk",
            content: { type: "text", text: chunk },
            messageId,
          },
        });
      }
    }
    return { stopReason: "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {});

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;

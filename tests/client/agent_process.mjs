// The agent as a child process, with both directions of its stdio tapped: every line either side
// writes goes into `transcript` ({dir: "agent" | "client", message}) in wire order, before the
// SDK sees it. Shared by the drivers (drive.mjs for v1, drive_v2.mjs for the v2 draft).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

export function startAgent({ python, args, cwd, transcript }) {
  const child = spawn(python, ["-m", "dsh_acp", ...args], { cwd, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  const decoder = new TextDecoder();
  let pending = "";
  const output = Readable.toWeb(child.stdout).pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        pending += decoder.decode(chunk, { stream: true });
        let newline;
        while ((newline = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          if (line.trim()) {
            let message;
            try {
              message = JSON.parse(line);
            } catch {
              message = { unparsable: line };
            }
            transcript.push({ dir: "agent", message });
          }
        }
        controller.enqueue(chunk);
      },
    }),
  );
  const stdinWriter = Writable.toWeb(child.stdin).getWriter();
  const input = new WritableStream({
    async write(chunk) {
      for (const line of decoder.decode(chunk).split("\n")) {
        if (line.trim()) transcript.push({ dir: "client", message: JSON.parse(line) });
      }
      await stdinWriter.write(chunk);
    },
    async close() {
      await stdinWriter.close();
    },
  });
  return { child, input, output, exited, stderr: () => stderr };
}

import { spawn } from "node:child_process";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

/** PipeHostRun is what a pipe host got back: the exit code and every answer, in order. */
export interface PipeHostRun {
  readonly exitCode: number | null;
  readonly answers: readonly { id: number; result: CallToolResult }[];
}

/**
 * runPipeHost plays a host that writes its requests to an MCP stdio server and closes stdin at
 * once (a pipe, a script): initialize (id 1), initialized, then one tools/call (id 2) of `call`.
 * It waits for the process to exit and parses each stdout line as a JSON-RPC answer.
 */
export async function runPipeHost(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  call: { name: string; arguments: Record<string, unknown> },
  stderr: "inherit" | "ignore" = "ignore",
): Promise<PipeHostRun> {
  const child = spawn(process.execPath, [...args], { env, stdio: ["pipe", "pipe", stderr] });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString("utf8");
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const lines = [
    {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "pipe", version: "1.0.0" },
      },
    },
    { jsonrpc: "2.0", method: "notifications/initialized" },
    { jsonrpc: "2.0", id: 2, method: "tools/call", params: call },
  ];
  child.stdin.end(lines.map((l) => `${JSON.stringify(l)}\n`).join(""));
  const exitCode = await exited;
  const answers = out
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { id: number; result: CallToolResult });
  return { exitCode, answers };
}

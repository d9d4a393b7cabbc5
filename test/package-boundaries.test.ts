import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * Each way a module can name the TypeScript client, or the MCP server that is built on it,
 * from a file two folders down.
 */
const clientImports = [
  'import { createSpillwayClient } from "@spillway/client";',
  'import { retryUnavailable } from "../../clients/ts/src/retry.js";',
  'import type { SpillwayClient } from "../../clients/ts/dist/index.js";',
  'export { createGrpcTransport } from "../../clients/ts/src/grpc-transport.js";',
  'export * from "@spillway/client";',
  'const dynamic = await import("@spillway/client");',
  'const relative = await import("../../clients/ts/src/client.js");',
  'import { createSpillwayMcpServer } from "@spillway/mcp";',
  'const mcp = await import("@spillway/mcp");',
  'const mcpRelative = await import("../../mcp/src/index.js");',
  'import { runCli } from "@spillway/cli";',
  'const cli = await import("@spillway/cli");',
  'const cliRelative = await import("../../cli/src/index.js");',
];

/** Each way a module can name the server, from a file `up` folders below the root. */
function serverImports(up: string): string[] {
  return [
    'import { startSpillwayServer } from "spillway";',
    `import { startSpillwayServer as start } from "${up}server/src/server.js";`,
    `export * from "${up}server/src/service.js";`,
    'const dynamic = await import("spillway");',
    `const relative = await import("${up}server/src/server.js");`,
  ];
}

/** Each way a module can name the browser inspector's code, from a file two folders down. */
const inspectorImports = [
  'import "@spillway/inspector/dist/inspector.js";',
  'const dynamic = await import("@spillway/inspector/dist/inspector.js");',
  'import { createViewer } from "../../inspector/src/viewer.js";',
];

/** The boundaries: which folders may not name the client, which may not name the server. */
const probes: { file: string; lines: string[] }[] = [
  ...["server/src", "conformance/src", "wire/src"].flatMap((folder) => [
    { file: `${folder}/probe.ts`, lines: clientImports },
    { file: `${folder}/probe.test.ts`, lines: clientImports },
  ]),
  { file: "clients/ts/src/probe.ts", lines: serverImports("../../../") },
  { file: "clients/ts/src/probe.test.ts", lines: serverImports("../../../") },
  { file: "wire/src/server-probe.ts", lines: serverImports("../../") },
  { file: "mcp/src/probe.ts", lines: serverImports("../../") },
  { file: "mcp/src/probe.test.ts", lines: serverImports("../../") },
  { file: "cli/src/probe.ts", lines: serverImports("../../") },
  { file: "cli/src/probe.test.ts", lines: serverImports("../../") },
  { file: "server/src/inspector-probe.ts", lines: inspectorImports },
  { file: "inspector/src/probe.ts", lines: [...serverImports("../../"), ...clientImports] },
];

/**
 * The package boundaries biome.json enforces (noRestrictedImports): the server, the wire layer
 * and the conformance runner never import the TypeScript client, @spillway/mcp or
 * @spillway/cli, and the client, the MCP server, the command line and the wire layer never
 * import the server, the server never imports the browser inspector's code (it serves its
 * files), and the inspector imports neither the server nor the Node client, by package name or
 * by a relative path, statically or with
 * import(), tests included. Checked with the repository's biome.json on probe files in a
 * scratch folder laid out like the repository.
 */
describe("the package boundaries", () => {
  const dir = scratchDir("spillway-boundaries-");
  let flagged: Map<string, Set<number>>;

  beforeAll(() => {
    copyFileSync(join(root, "biome.json"), join(dir, "biome.json"));
    for (const { file, lines } of probes) {
      mkdirSync(join(dir, dirname(file)), { recursive: true });
      writeFileSync(join(dir, file), `${lines.join("\n")}\n`);
    }
    const run = spawnSync(
      join(root, "node_modules/.bin/biome"),
      ["lint", "--vcs-enabled=false", "--only=style/noRestrictedImports", "--reporter=json", "."],
      { cwd: dir, encoding: "utf8" },
    );
    const report = JSON.parse(run.stdout) as {
      diagnostics: { category: string; location: { path: string; start: { line: number } } }[];
    };
    flagged = new Map();
    for (const d of report.diagnostics) {
      if (d.category !== "lint/style/noRestrictedImports") continue;
      const lines = flagged.get(d.location.path) ?? new Set<number>();
      lines.add(d.location.start.line);
      flagged.set(d.location.path, lines);
    }
  });

  it.each(probes)("refuses every import across the boundary in $file", ({ file, lines }) => {
    const missed = lines.filter((_, i) => !flagged.get(file)?.has(i + 1));
    expect(missed).toEqual([]);
  });
});

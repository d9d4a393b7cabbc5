import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The folder of this suite's configs and known-failing lists. */
const here = fileURLToPath(new URL(".", import.meta.url));
/** The repository root, whatever the folder this file runs from (source or dist/). */
const root = join(here, here.includes("/dist/") ? "../../.." : "../..");

/** The connectconformance binary install-connectconformance.sh puts in the cache. */
function connectconformanceBin(): string {
  const cache = process.env.SPILLWAY_CACHE ?? join(homedir(), ".cache", "spillway");
  const bin = join(cache, "bin", "connectconformance");
  if (!existsSync(bin)) {
    throw new Error(
      `${bin} is missing: run bash conformance/connectrpc/scripts/install-connectconformance.sh`,
    );
  }
  return bin;
}

/** How one connectconformance run ended. */
export interface ConformanceRun {
  /** The command line, as it can be run by hand from the repository root. */
  readonly command: string;
  readonly exitCode: number | null;
  readonly output: string;
  /** From the closing summary; undefined when it has none. */
  readonly total: number | undefined;
  readonly passed: number | undefined;
  readonly failed: number | undefined;
  readonly wallMs: number;
}

/** A mode's side of the suite: its features, known failures and program under test. */
export const modes = {
  server: {
    conf: "conformance/connectrpc/server.yaml",
    knownFailing: "conformance/connectrpc/server-known-failing.txt",
    program: "dist/conformance/connectrpc/server-under-test.js",
    // Two server processes and four RPCs in flight each keep a 2-core machine busy, not swamped.
    parallelism: ["--max-servers", "2", "--parallel", "4"],
  },
  client: {
    conf: "conformance/connectrpc/client.yaml",
    knownFailing: "conformance/connectrpc/client-known-failing.txt",
    program: "dist/conformance/connectrpc/client-under-test.js",
    // The client under test runs 8 cases at once against at most two reference servers.
    parallelism: ["--max-servers", "2"],
  },
  "client-grpc-web": {
    conf: "conformance/connectrpc/client-grpc-web.yaml",
    knownFailing: "conformance/connectrpc/client-grpc-web-known-failing.txt",
    program: "dist/conformance/connectrpc/client-under-test.js",
    parallelism: ["--max-servers", "2"],
  },
} as const;

/**
 * runConnectconformance runs connectconformance in `mode` against the built program under test
 * (dist/ must be built) from the repository root, with the mode's features and known-failing
 * list (or the file `knownFailing`: connectconformance reads one list file, and ignores further
 * --known-failing arguments after it) and `extra` arguments placed before the program, `node`
 * options given to the program under test, and returns its exit code, output and closing
 * summary. It never throws for a failed run.
 */
export function runConnectconformance(
  mode: keyof typeof modes,
  extra: readonly string[] = [],
  knownFailing?: string,
  nodeOptions: readonly string[] = [],
): Promise<ConformanceRun> {
  const m = modes[mode];
  const args = [
    "--mode",
    mode === "server" ? "server" : "client",
    "--conf",
    m.conf,
    "--known-failing",
    `@${knownFailing ?? m.knownFailing}`,
    ...m.parallelism,
    ...extra,
    "--",
    process.execPath,
    ...nodeOptions,
    m.program,
  ];
  const bin = connectconformanceBin();
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (exitCode) => {
      const total = /^Total cases: (\d+)$/m.exec(output);
      const counts = /^(\d+) passed, (\d+) failed$/m.exec(output);
      resolve({
        command: ["connectconformance", ...args.map((a) => (a === process.execPath ? "node" : a))]
          .map((a) => (/[\s*]/.test(a) ? `'${a}'` : a))
          .join(" "),
        exitCode,
        output,
        total: total === null ? undefined : Number(total[1]),
        passed: counts === null ? undefined : Number(counts[1]),
        failed: counts === null ? undefined : Number(counts[2]),
        wallMs: Date.now() - started,
      });
    });
  });
}

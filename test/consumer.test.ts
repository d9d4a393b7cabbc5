import { execFile, execFileSync, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type InstalledTree,
  installPacked,
  measureInstall,
  npmEnv,
  type PackedPackage,
  packWorkspaces,
} from "./support/packed-install.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = join(root, "node_modules/.bin/tsc");
const workspaces = ["proto", "wire", "clients/ts", "server", "conformance", "cli", "inspector"];

/** What a client install may weigh: the budget. */
const budget = { packages: 15, kibibytes: 10 * 1024 };
/** The server's heavy dependencies, none of which a client install may bring. */
const serverOnly = [/^@aws-sdk\//, /^minio$/, /^re2$/, /^pino$/, /^prom-client$/];

/**
 * The consumer's compiler settings: the strictest a user is likely to have, and the shipped
 * declarations are checked too (no skipLibCheck). Node's types come from the repository, as a
 * user's own @types/node would; the DOM lib is there because connect's declarations name the
 * fetch API's `HeadersInit`, which Node's types do not declare globally.
 */
const consumerTsconfig = {
  compilerOptions: {
    target: "ES2022",
    lib: ["ES2023", "DOM"],
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    verbatimModuleSyntax: true,
    skipLibCheck: false,
    types: ["node"],
    typeRoots: [join(root, "node_modules/@types")],
    rootDir: "src",
    outDir: "dist",
  },
  include: ["src"],
};

/**
 * re2Mirror gives the packed server's install the regex engine's native addon the repository's
 * own install built, through re2's documented download mirror (RE2_DOWNLOAD_MIRROR, here a
 * folder): without it the install compiles RE2 from source, minutes on a small machine.
 */
function re2Mirror(dir: string): NodeJS.ProcessEnv {
  const re2 = createRequire(join(root, "server/package.json"))
    .resolve("re2/package.json")
    .replace(/package\.json$/, "");
  mkdirSync(dir);
  copyFileSync(
    join(re2, "build/Release/re2.node"),
    join(dir, `${process.platform}-${process.arch}-${process.versions.modules}`),
  );
  return {
    RE2_DOWNLOAD_MIRROR: dir,
    RE2_DOWNLOAD_SKIP_PATH: "1",
    RE2_DOWNLOAD_SKIP_VER: "1",
  };
}

/** ConsumerOutput is the line test/consumer/offload-and-read.ts prints. */
interface ConsumerOutput {
  readonly handle: string;
  readonly lineCount: string;
  readonly nextOffset: string;
  readonly rendered: string;
}

/**
 * typeCheckConsumer puts test/consumer/<program>.ts in the project at `dir` and compiles it with
 * the repository's tsc under consumerTsconfig; any diagnostic fails the test.
 */
function typeCheckConsumer(dir: string, program = "offload-and-read"): void {
  mkdirSync(join(dir, "src"), { recursive: true });
  copyFileSync(join(root, `test/consumer/${program}.ts`), join(dir, `src/${program}.ts`));
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(consumerTsconfig, null, 2));
  // tsc prints nothing and exits 0 when there is no error.
  const typeCheck = spawnSync(tsc, ["-p", join(dir, "tsconfig.json")], { encoding: "utf8" });
  expect(typeCheck.stdout + typeCheck.stderr).toBe("");
  expect(typeCheck.status).toBe(0);
  expect(existsSync(join(dir, `dist/${program}.js`))).toBe(true);
}

/** runConsumer runs the compiled consumer in `dir` against the server at `url`. */
async function runConsumer(dir: string, url: string): Promise<ConsumerOutput> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(dir, "dist/offload-and-read.js"), url],
    { cwd: dir },
  );
  return JSON.parse(stdout) as ConsumerOutput;
}

/** The exact window the consumer reads: lines 500-501 of its 1000-line log. */
const expectedRendered =
  "[res_build-log] lines 500-501 of 1000 (25892 bytes)\n" +
  "   500\tline 500 of the build log\n" +
  "   501\tline 501 of the build log\n" +
  "[more: offset=501]\n";

function describeInstall(what: string, tree: InstalledTree): string {
  const mib = (tree.kibibytes / 1024).toFixed(1);
  return `${what}: ${tree.packages.length} packages, ${tree.kibibytes} KiB (${mib} MiB) on disk\n  ${tree.packages.join("\n  ")}`;
}

/**
 * The packages as a user gets them: `npm pack`ed, installed into fresh projects from the
 * tarballs (offline, from the npm cache), a consumer type-checked against the shipped
 * declarations and run against the packed server's `spillway` bin.
 */
describe("the packed packages in a fresh project", () => {
  const dir = scratchDir("spillway-consumer-");
  const clientDir = join(dir, "client");
  const serverDir = join(dir, "server");
  let packed: Map<string, PackedPackage>;
  let client: InstalledTree;
  let server: InstalledTree;
  let running: SpillwayProcess | undefined;

  beforeAll(() => {
    mkdirSync(join(dir, "packs"));
    mkdirSync(clientDir);
    mkdirSync(serverDir);
    packed = packWorkspaces(root, workspaces, join(dir, "packs"));
    client = installPacked(clientDir, root, packed, "@spillway/client");
    server = installPacked(serverDir, root, packed, "spillway", re2Mirror(join(dir, "re2")));
  }, 180_000);

  afterAll(async () => {
    await running?.stop();
  });

  it("packs each package with its README, built code and declarations, and no tests", () => {
    expect([...packed.keys()].sort()).toEqual([
      "@spillway/cli",
      "@spillway/client",
      "@spillway/inspector",
      "@spillway/proto",
      "@spillway/wire",
      "spillway",
      "spillway-conformance",
    ]);
    for (const pkg of packed.values()) {
      expect(pkg.files, pkg.name).toContain("README.md");
      expect(pkg.files, pkg.name).toContain("package.json");
      expect(
        pkg.files.filter((f) => /^dist\/.*\.js$/.test(f)),
        pkg.name,
      ).not.toEqual([]);
      expect(
        pkg.files.filter((f) => /\.test\.|tsbuildinfo|(^|\/)test\//.test(f)),
        pkg.name,
      ).toEqual([]);
    }
    for (const name of ["@spillway/client", "@spillway/proto", "@spillway/wire"]) {
      expect(
        packed.get(name)?.files.filter((f) => /^dist\/.*\.d\.ts$/.test(f)),
        name,
      ).not.toEqual([]);
    }
    expect(packed.get("spillway")?.files).toContain("dist/entry.cjs");
    // The inspector ships its three built files and no sources.
    expect(packed.get("@spillway/inspector")?.files.toSorted()).toEqual([
      "LICENSE",
      "README.md",
      "dist/index.html",
      "dist/inspector.css",
      "dist/inspector.js",
      "package.json",
    ]);
  });

  it("installs the client within budget and without the server's dependencies", async ({
    annotate,
  }) => {
    const report = describeInstall("client install (@spillway/client)", client);
    console.log(report);
    console.log(describeInstall("server install (spillway)", server).split("\n")[0]);
    await annotate(report);
    expect(client.packages).toContain("@spillway/client");
    expect(client.packages.filter((name) => serverOnly.some((re) => re.test(name)))).toEqual([]);
    expect(client.packages.length).toBeLessThanOrEqual(budget.packages);
    expect(client.kibibytes).toBeLessThanOrEqual(budget.kibibytes);
    // The same patterns do find the server's dependencies where they belong.
    for (const re of serverOnly) expect(server.packages.some((name) => re.test(name))).toBe(true);
  });

  it("type-checks a consumer under strict settings and runs it against the packed server", async ({
    annotate,
  }) => {
    typeCheckConsumer(clientDir);
    running = await spawnSpillway(
      ["--backend", "memory"],
      {},
      join(serverDir, "node_modules/.bin/spillway"),
    );
    const out = await runConsumer(clientDir, running.url);
    const report = [
      "type-check: tsc -p tsconfig.json (strict, exactOptionalPropertyTypes, NodeNext, skipLibCheck false): 0 errors",
      `run against the packed server's spillway bin (${running.url}): handle ${out.handle}, ${out.lineCount} lines`,
      out.rendered,
    ].join("\n");
    console.log(report);
    await annotate(report);
    expect(out.lineCount).toBe("1000");
    expect(out.nextOffset).toBe("501");
    expect(out.rendered).toBe(expectedRendered);
  });

  it("answers `spillway mcp` without @spillway/mcp installed beside it: exit 2, naming it", () => {
    const run = spawnSync(join(serverDir, "node_modules/.bin/spillway"), ["mcp", "--help"], {
      cwd: serverDir,
      encoding: "utf8",
    });
    expect(run.stderr).toBe(
      "spillway: mcp runs spillway-mcp of the @spillway/mcp package, which is not installed beside the server; install it (docs/mcp.md)\n",
    );
    expect(run.stdout).toBe("");
    expect(run.status).toBe(2);
  });

  it("answers `spillway cat` without @spillway/cli installed beside it: exit 2, naming it", () => {
    const run = spawnSync(join(serverDir, "node_modules/.bin/spillway"), ["cat", "r", "h"], {
      cwd: serverDir,
      encoding: "utf8",
    });
    expect(run.stderr).toBe(
      "spillway: cat runs spillway-cli of the @spillway/cli package, which is not installed beside the server; install it (docs/cli.md)\n",
    );
    expect(run.stdout).toBe("");
    expect(run.status).toBe(2);
  });

  it("installs @spillway/cli without the server's dependencies; its spillway-cli puts and cats", async () => {
    const cliDir = join(dir, "cli");
    mkdirSync(cliDir);
    const tree = installPacked(cliDir, root, packed, "@spillway/cli");
    expect(tree.packages.filter((name) => serverOnly.some((re) => re.test(name)))).toEqual([]);
    expect(tree.packages).not.toContain("spillway");
    const local =
      running ??
      (await spawnSpillway(
        ["--backend", "memory"],
        {},
        join(serverDir, "node_modules/.bin/spillway"),
      ));
    try {
      const bin = join(cliDir, "node_modules/.bin/spillway-cli");
      const env = { ...process.env, SPILLWAY_URL: local.url };
      const put = spawnSync(bin, ["put", "--call-id", "packed", "packed-run", "-"], {
        input: "installed\n",
        encoding: "utf8",
        env,
      });
      expect([put.status, put.stdout, put.stderr]).toEqual([0, "res_packed\n", ""]);
      const cat = spawnSync(bin, ["cat", "packed-run", "res_packed"], { encoding: "utf8", env });
      expect([cat.status, cat.stdout]).toEqual([0, "installed\n"]);
    } finally {
      if (local !== running) await local.stop();
    }
  });

  it("embeds the packed server as a library: the client and a metrics scrape reach it", async () => {
    typeCheckConsumer(serverDir, "embed-server");
    // The client consumer, compiled by the test before this one unless that one was left out.
    if (!existsSync(join(clientDir, "dist/offload-and-read.js"))) typeCheckConsumer(clientDir);
    const embedded = spawn(process.execPath, [join(serverDir, "dist/embed-server.js")], {
      cwd: serverDir,
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const [line] = (await once(createInterface({ input: embedded.stdout }), "line")) as [string];
      const urls = JSON.parse(line) as { url: string; metrics: string };
      const out = await runConsumer(clientDir, urls.url);
      expect(out.rendered).toBe(expectedRendered);
      const scrape = await (await fetch(urls.metrics)).text();
      // The client sends a small payload as an OffloadBatch; the read is a ReadToolOutput.
      for (const [type, method] of [
        ["unary", "OffloadBatch"],
        ["server_stream", "ReadToolOutput"],
      ]) {
        expect(scrape).toContain(
          `grpc_server_handled_total{grpc_type="${type}",grpc_service="spillway.v1.SpillwayService",grpc_method="${method}",grpc_code="OK"} 1\n`,
        );
      }
    } finally {
      embedded.kill("SIGTERM");
      await once(embedded, "exit");
    }
  });
});

/**
 * npm installs a git dependency from the repository's root only, never a workspace folder, so
 * the root is the client's git package: its `prepare` builds every package, and it bundles
 * @spillway/client, @spillway/proto and @spillway/wire and re-exports the client. This installs
 * the committed HEAD from a git+file URL of this repository, offline, the way
 * `npm install @spillway/client@git+https://...` would from a remote.
 */
describe("the client installed from a git URL", () => {
  const dir = scratchDir("spillway-git-consumer-");
  let running: SpillwayProcess | undefined;

  afterAll(async () => {
    await running?.stop();
  });

  it("builds, installs as @spillway/client, type-checks and runs the consumer", async ({
    annotate,
  }) => {
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({
        name: "spillway-git-consumer",
        version: "1.0.0",
        private: true,
        type: "module",
        allowScripts: { "@spillway/client": true, re2: true },
      }),
    );
    // npm prepares the git dependency in a clone of its own: a full workspace install (the
    // server's re2 addon included) and the root's `prepare` build, all from the npm cache.
    execFileSync(
      "npm",
      ["install", "--offline", "--no-audit", "--no-fund", `@spillway/client@git+file://${root}`],
      { cwd: dir, env: npmEnv(re2Mirror(join(dir, "re2"))), stdio: ["ignore", "pipe", "pipe"] },
    );
    const tree = measureInstall(dir);
    const report = describeInstall("git install (@spillway/client@git+file://<repository>)", tree);
    console.log(report);
    await annotate(report);
    expect(tree.packages).toContain("@spillway/client");
    expect(tree.packages.filter((name) => serverOnly.some((re) => re.test(name)))).toEqual([]);
    expect(tree.kibibytes).toBeLessThanOrEqual(budget.kibibytes);

    typeCheckConsumer(dir);
    running = await spawnSpillway(["--backend", "memory"]);
    const out = await runConsumer(dir, running.url);
    expect(out.rendered).toBe(expectedRendered);
  }, 300_000);
});

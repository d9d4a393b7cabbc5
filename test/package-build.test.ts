import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { npmEnv } from "./support/packed-install.js";
import { scratchDir } from "./support/scratch-dir.js";
import { buildWorkspace } from "./support/workspace-build.js";
import { copyWorkspace, workspacePackages } from "./support/workspace-copy.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** One compiled file of each package that its users reach: if it is there, the package built. */
const entries: Record<string, string> = {
  proto: "dist/spillway/v1/spillway_pb.js",
  wire: "dist/index.js",
  "clients/ts": "dist/index.js",
  server: "dist/entry.cjs",
  conformance: "dist/cli.js",
  mcp: "dist/cli.js",
  cli: "dist/main.js",
  inspector: "dist/inspector.js",
};

/** Runs the workspace build (`npm run build`'s commands) in `dir`; returns its exit and output. */
const build = (dir: string) => buildWorkspace(dir);

/**
 * The build as a developer and `npm pack` meet it, each in its own copy of the repository (never
 * the checkout other tests run from): a dist/ deleted by hand, and outputs of sources that are
 * gone.
 *
 * copyAndBuild copies the repository into a fresh scratch folder and builds it there. */
function copyAndBuild(prefix: string): string {
  const dir = scratchDir(prefix);
  beforeAll(() => {
    copyWorkspace(root, dir);
    expect(build(dir)).toEqual({ status: 0, output: "" });
  }, 120_000);
  return dir;
}

describe("the workspace build", () => {
  const dir = copyAndBuild("spillway-build-");

  it("builds every package again after its dist/ is deleted", () => {
    for (const { folder } of workspacePackages) {
      rmSync(join(dir, folder, "dist"), { recursive: true, force: true });
    }
    expect(build(dir)).toEqual({ status: 0, output: "" });
    for (const { folder } of workspacePackages) {
      expect(existsSync(join(dir, folder, entries[folder] ?? "")), folder).toBe(true);
    }
  }, 120_000);
});

describe("npm pack of each package", () => {
  const dir = copyAndBuild("spillway-prepack-");

  it("packs no output of a source that no longer exists, and no build state", () => {
    for (const { folder, name } of workspacePackages) {
      // What a deleted or renamed source leaves in dist/ after an incremental build.
      writeFileSync(join(dir, folder, "dist/removed-source.js"), "export {};\n");
      execFileSync("npm", ["run", "prepack"], {
        cwd: join(dir, folder),
        env: npmEnv(),
        stdio: ["ignore", "pipe", "pipe"],
      });
      expect(readdirSync(join(dir, folder, "dist")), name).not.toContain("removed-source.js");
      expect(existsSync(join(dir, folder, entries[folder] ?? "")), name).toBe(true);
      const [packed] = JSON.parse(
        execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
          cwd: join(dir, folder),
          env: npmEnv(),
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        }),
      ) as { files: { path: string }[] }[];
      const files = (packed?.files ?? []).map((f) => f.path);
      expect(files, name).toContain(entries[folder]);
      expect(
        files.filter((f) => /tsbuildinfo|removed-source/.test(f)),
        name,
      ).toEqual([]);
    }
  }, 180_000);
});

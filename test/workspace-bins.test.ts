import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { workspacePackages } from "./support/workspace-copy.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** The bins a workspace package declares, as paths relative to the repository root. */
function bins(workspace: string): Map<string, string> {
  const manifest = JSON.parse(readFileSync(join(root, workspace, "package.json"), "utf8")) as {
    bin?: Record<string, string>;
  };
  return new Map(
    Object.entries(manifest.bin ?? {}).map(([name, path]) => [name, join(workspace, path)]),
  );
}

const declared = new Map(workspacePackages.flatMap(({ folder }) => [...bins(folder)]));

describe("the workspace's executables", () => {
  it("are committed files, so `npm ci` links them before `prepare` builds dist/", () => {
    // npm links a bin only when its file exists at install; in a fresh clone dist/ does not
    // exist until the root's prepare runs, after the links are made, so a bin under dist/
    // left `npx spillway` "not found" in the repository.
    expect([...declared.keys()].sort()).toEqual([
      "spillway",
      "spillway-cli",
      "spillway-conformance",
      "spillway-mcp",
      "spillway-mcp-proxy",
    ]);
    const tracked = execFileSync("git", ["ls-files", "--", ...declared.values()], {
      cwd: root,
      encoding: "utf8",
    })
      .split("\n")
      .filter((line) => line !== "");
    expect(tracked.sort()).toEqual([...declared.values()].sort());
  });

  it("run the built commands: `spillway --help`, `spillway-conformance` without a target, `spillway-mcp --help`, `spillway-mcp-proxy` without a command, `spillway-cli --help`", () => {
    const spillway = declared.get("spillway") ?? "";
    const help = execFileSync(process.execPath, [join(root, spillway), "--help"], {
      encoding: "utf8",
    });
    expect(help).toMatch(/^Usage: spillway serve \[flags\]$/m);

    const conformance = declared.get("spillway-conformance") ?? "";
    const usage = spawnSync(process.execPath, [join(root, conformance)], { encoding: "utf8" });
    expect(usage.status).toBe(2);
    expect(usage.stdout).toMatch(/^usage: spillway-conformance --target <url>/m);

    const mcp = declared.get("spillway-mcp") ?? "";
    const mcpHelp = execFileSync(process.execPath, [join(root, mcp), "--help"], {
      encoding: "utf8",
    });
    expect(mcpHelp).toMatch(/^Usage: spillway-mcp \[flags\]$/m);

    const proxy = declared.get("spillway-mcp-proxy") ?? "";
    const proxyUsage = spawnSync(process.execPath, [join(root, proxy)], { encoding: "utf8" });
    expect(proxyUsage.status).toBe(2);
    expect(proxyUsage.stderr).toMatch(/^Usage: spillway-mcp-proxy \[flags\] -- <command>/m);

    const cli = declared.get("spillway-cli") ?? "";
    const cliHelp = execFileSync(process.execPath, [join(root, cli), "--help"], {
      encoding: "utf8",
    });
    expect(cliHelp).toMatch(/^Usage: spillway-cli \[global flags\] <command>/m);
  });
});

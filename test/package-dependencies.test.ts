import { readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { buildWorkspace } from "./support/workspace-build.js";
import { copyWorkspace, workspacePackages } from "./support/workspace-copy.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const builtins = new Set(builtinModules);

/**
 * Module specifiers in compiled JavaScript or declarations: import/export from, import(),
 * require(), createRequire(…)(). A specifier holds no whitespace, `$`, `{` or `}`, so a message
 * like `forked from "${runId}"` is not taken for one.
 */
const specifierPattern =
  /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*|\bcreateRequire\([^()]*\)\s*\(\s*)["']([^"'\s${}]+)["']/g;
/**
 * Files a package's code finds in another package without loading it: `require.resolve("x/y")`
 * or `createRequire(...).resolve("x/y")`. Such a package is used (the server serves the
 * inspector's files), but may also be an optional one the code only looks for (`spillway mcp`
 * runs @spillway/mcp when it is installed), so it needs no declaration.
 */
const resolvedPattern = /\.resolve\s*\(\s*["']([^"'\n]+)["']/g;

/** The package a bare specifier names: `@scope/name` or `name`, without a subpath. */
function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return (specifier.startsWith("@") ? parts.slice(0, 2) : parts.slice(0, 1)).join("/");
}

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1));
}

/** resolvedPackages lists the packages whose files the compiled code under `dist` resolves. */
function resolvedPackages(dist: string): Set<string> {
  const found = new Set<string>();
  for (const file of filesUnder(dist).filter((f) => /\.c?js$/.test(f))) {
    const code = readFileSync(join(dist, file), "utf8");
    for (const [, specifier = ""] of code.matchAll(resolvedPattern)) {
      if (!specifier.startsWith(".") && !specifier.startsWith("node:")) {
        found.add(packageOf(specifier));
      }
    }
  }
  return found;
}

/**
 * importedPackages maps each package that the compiled code under `dist` names (in .js, .cjs
 * and .d.ts files alike: an installed consumer loads the first and type-checks the last) to one
 * file naming it. Node's builtins and relative paths are left out.
 */
function importedPackages(dist: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of filesUnder(dist).filter((f) => /\.(c?js|d\.c?ts)$/.test(f))) {
    const code = readFileSync(join(dist, file), "utf8").replace(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g, "");
    for (const [, specifier = ""] of code.matchAll(specifierPattern)) {
      if (specifier.startsWith(".") || specifier.startsWith("node:")) continue;
      const name = packageOf(specifier);
      if (builtins.has(name) || found.has(name)) continue;
      found.set(name, file);
    }
  }
  return found;
}

/**
 * Each package's manifest against what its compiled code imports, built from scratch in a copy
 * of the repository (an older dist/ may hold outputs of sources that are gone): an import of an
 * undeclared package works in this workspace, where every package is hoisted, and fails in a
 * user's install; a declared package nothing imports only weighs the install down.
 */
describe("each package's dependencies", () => {
  const dir = scratchDir("spillway-deps-");

  beforeAll(() => {
    copyWorkspace(root, dir);
    expect(buildWorkspace(dir)).toEqual({ status: 0, output: "" });
  }, 120_000);

  it.each(workspacePackages)(
    "$name declares every package its dist/ imports, and none it does not use",
    ({ folder, name }) => {
      const manifest = JSON.parse(readFileSync(join(dir, folder, "package.json"), "utf8")) as {
        dependencies?: Record<string, string>;
        peerDependencies?: Record<string, string>;
      };
      const declared = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
      const imported = importedPackages(join(dir, folder, "dist"));
      const resolved = resolvedPackages(join(dir, folder, "dist"));
      const undeclared = [...imported].filter(([pkg]) => !declared.includes(pkg));
      expect(
        undeclared.map(([pkg, file]) => `${pkg} (dist/${file})`),
        name,
      ).toEqual([]);
      expect(
        declared.filter((pkg) => !imported.has(pkg) && !resolved.has(pkg)),
        name,
      ).toEqual([]);
    },
  );
});

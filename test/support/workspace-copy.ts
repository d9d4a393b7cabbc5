import { cpSync, mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";

const repository = fileURLToPath(new URL("../..", import.meta.url));

function manifestOf(folder: string): { workspaces?: string[]; name: string } {
  return JSON.parse(readFileSync(join(repository, folder, "package.json"), "utf8"));
}

/**
 * The workspace folders and the package each holds, in the order the root package.json lists
 * them and named by each folder's own package.json, so a workspace added there is covered here.
 */
export const workspacePackages: readonly { folder: string; name: string }[] = (
  manifestOf(".").workspaces ?? []
).map((folder) => ({ folder, name: manifestOf(folder).name }));

/** What a build or an install leaves behind, never copied. */
const buildState = new Set(["dist", "node_modules"]);

/**
 * copyWorkspace copies the repository at `root` into `dest` as a checkout would have it: the
 * root tsconfigs and every workspace folder, without dist/, node_modules or *.tsbuildinfo.
 * dest/node_modules links each third-party package to the repository's installed one and each
 * workspace package to its copy, so a build or an `npm run` there reads and writes only the
 * copy.
 */
export function copyWorkspace(root: string, dest: string): void {
  for (const file of ["package.json", "tsconfig.base.json", "tsconfig.build.json"]) {
    cpSync(join(root, file), join(dest, file));
  }
  for (const { folder } of workspacePackages) {
    cpSync(join(root, folder), join(dest, folder), {
      recursive: true,
      filter: (path) => !buildState.has(basename(path)) && !path.endsWith(".tsbuildinfo"),
    });
  }
  const modules = join(dest, "node_modules");
  mkdirSync(join(modules, "@spillway"), { recursive: true });
  const own = new Set<string>(workspacePackages.map((p) => p.name));
  const installed = join(root, "node_modules");
  for (const entry of readdirSync(installed)) {
    const names = entry.startsWith("@")
      ? readdirSync(join(installed, entry)).map((n) => `${entry}/${n}`)
      : [entry];
    for (const name of names) {
      if (own.has(name)) continue;
      if (entry.startsWith("@")) mkdirSync(join(modules, entry), { recursive: true });
      symlinkSync(realpathSync(join(installed, name)), join(modules, name));
    }
  }
  for (const { folder, name } of workspacePackages) {
    symlinkSync(join(dest, folder), join(modules, name));
  }
}

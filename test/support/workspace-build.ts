import { spawnSync } from "node:child_process";
import { join } from "node:path";

/**
 * buildWorkspace runs the workspace build (`npm run build`'s commands) in the repository at
 * `dir`: `tsc -b tsconfig.build.json` and the tsconfigs in `extra`, then the CLI's bundle
 * (cli/build.mjs) and the browser inspector's (inspector/build.mjs), both esbuild. It returns the exit status of the first
 * step that failed, or 0, and everything the steps printed; a build with nothing to report
 * prints nothing.
 */
export function buildWorkspace(
  dir: string,
  extra: readonly string[] = [],
): { status: number | null; output: string } {
  const steps: [string, string[]][] = [
    [join(dir, "node_modules/.bin/tsc"), ["-b", "tsconfig.build.json", ...extra]],
    [process.execPath, [join(dir, "cli/build.mjs")]],
    [process.execPath, [join(dir, "inspector/build.mjs")]],
  ];
  let output = "";
  for (const [command, args] of steps) {
    const run = spawnSync(command, args, { cwd: dir, encoding: "utf8" });
    output += run.stdout + run.stderr;
    if (run.status !== 0) return { status: run.status, output };
  }
  return { status: 0, output };
}

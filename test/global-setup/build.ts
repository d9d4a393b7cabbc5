import { fileURLToPath } from "node:url";
import { buildWorkspace } from "../support/workspace-build.js";

/**
 * setup builds every package's dist/ (`tsc -b tsconfig.build.json`, then the browser
 * inspector's bundle) and the harness programs under dist/ (`tsconfig.harness.json`:
 * benchmarks, test support, connectrpc's conformance programs) before any test file of its
 * project starts, so tests that run the compiled `spillway` CLI, import a compiled module or
 * load the inspector see the code beside them. A build error fails the run. Each project that
 * lists this setup runs it in turn, never at the same time; a build that is up to date writes
 * nothing but the inspector's three files.
 */
export default function setup(): void {
  // One build before any file starts: building in each file would rewrite dist/ while another
  // file's server is loading it.
  const { status, output } = buildWorkspace(fileURLToPath(new URL("../..", import.meta.url)), [
    "tsconfig.harness.json",
  ]);
  if (status !== 0) throw new Error(`the workspace build failed (exit ${status}):\n${output}`);
}

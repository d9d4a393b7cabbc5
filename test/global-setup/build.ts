import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * setup builds every package's dist/ (`tsc -b tsconfig.build.json`) and the harness programs
 * under dist/ (`tsconfig.harness.json`: benchmarks, test support, connectrpc's conformance
 * programs) before any test file of its project starts, so tests that run the compiled `spillway` CLI or import a compiled module
 * see the code beside them. A build error fails the run. Each project that lists this setup
 * runs it in turn, never at the same time; a build that is up to date writes nothing.
 */
export default function setup(): void {
  // One build before any file starts: building in each file would rewrite dist/ while another
  // file's server is loading it.
  execFileSync(fileURLToPath(new URL("../../node_modules/.bin/tsc", import.meta.url)), [
    "-b",
    fileURLToPath(new URL("../../tsconfig.build.json", import.meta.url)),
    fileURLToPath(new URL("../../tsconfig.harness.json", import.meta.url)),
  ]);
}

// Bundles the CLI into dist/spillway-cli.mjs, the file its bin runs: every import inlined, so a
// command starts by loading one file instead of resolving and compiling a few hundred modules
// (`spillway-cli runs` starts in about half the time). The protocol and SDK code come from the
// workspace's TypeScript sources (the `@spillway/source` condition), so the bundle needs no
// other package built first. The optional `@opentelemetry/api` stays outside: the SDK loads it
// at run time from wherever the application installed it.
import { build } from "esbuild";

const here = new URL(".", import.meta.url);
await build({
  entryPoints: [new URL("src/main.ts", here).pathname],
  outfile: new URL("dist/spillway-cli.mjs", here).pathname,
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  conditions: ["@spillway/source"],
  external: ["@opentelemetry/api"],
  legalComments: "none",
  logLevel: "warning",
});

// Bundles the inspector into dist/: index.html, inspector.js (every import inlined, so the page
// loads one script from its own origin) and inspector.css. The protocol code comes from
// @spillway/proto's TypeScript sources (the `@spillway/source` condition), so the bundle needs no
// other package built first.
import { copyFileSync, mkdirSync } from "node:fs";
import { build } from "esbuild";

const here = new URL(".", import.meta.url);
const dist = new URL("dist/", here);
mkdirSync(dist, { recursive: true });
await build({
  entryPoints: [new URL("src/main.ts", here).pathname],
  outfile: new URL("inspector.js", dist).pathname,
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "es2022",
  conditions: ["@spillway/source"],
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
for (const file of ["index.html", "inspector.css"]) {
  copyFileSync(new URL(`static/${file}`, here), new URL(file, dist));
}

#!/usr/bin/env node
// Lists the symbols Spillway's gRPC stack imports from @connectrpc/connect/protocol*, marking
// those connect documents as `@private` (internal, no semantic versioning), and counts them.
// Usage: node scripts/connect-private-symbols.mjs [connect package dir]
// (default: the @connectrpc/connect that node_modules resolves). Run it before and after a
// connect upgrade; docs/design/grpc-fast-path.md says what to do with the list.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const connectDir = process.argv[2] ?? "node_modules/@connectrpc/connect";
const sources = execFileSync("git", ["ls-files", "server/src", "clients/ts/src", "wire/src"], {
  encoding: "utf8",
})
  .split("\n")
  .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));

/** "module name" -> the files importing it. */
const imports = new Map();
const importRe =
  /import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*"(@connectrpc\/connect\/protocol[^"]*)"/g;
for (const file of sources) {
  for (const [, names, module] of readFileSync(file, "utf8").matchAll(importRe)) {
    for (const raw of names.split(",")) {
      const name = raw
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)[0];
      if (name === "") continue;
      const key = `${module} ${name}`;
      imports.set(key, [...(imports.get(key) ?? []), file]);
    }
  }
}

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** Whether the declaration of name in the module's .d.ts files carries @private. */
function privacy(module, name) {
  const dir = join(connectDir, "dist/esm", module.replace("@connectrpc/connect/", ""));
  const decl = `(?:export\\s+)?(?:declare\\s+)?(?:function|const|type|interface|class)\\s+${escapeRegExp(name)}\\b`;
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".d.ts"))) {
    const text = readFileSync(join(dir, file), "utf8");
    const documented = new RegExp(`(/\\*\\*(?:(?!\\*/)[\\s\\S])*\\*/)\\s*${decl}`).exec(text);
    if (documented !== null) return documented[1].includes("@private") ? "private" : "public";
    if (new RegExp(decl).test(text)) return "public";
  }
  return "not found";
}

let privateCount = 0;
for (const [key, files] of [...imports].sort()) {
  const [module, name] = key.split(" ");
  const kind = privacy(module, name);
  if (kind === "private") privateCount++;
  console.log(`${kind.padEnd(9)} ${module} ${name}  <- ${[...new Set(files)].join(", ")}`);
}
console.log(`${imports.size} symbols imported, ${privateCount} @private`);

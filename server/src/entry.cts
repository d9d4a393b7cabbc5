#!/usr/bin/env node
// The `spillway` executable. libuv sizes its thread pool from UV_THREADPOOL_SIZE once, when the
// pool first starts, and loading an ES module already starts it: a default set in the CLI's
// own module would come too late. This CommonJS file runs before any of that, so the default
// it sets holds. The pool runs the filesystem backend's file creations and fsyncs; Node's
// default of 4 threads left 32 concurrent small offloads queued behind 4 fsyncs at a time
// (test/thread-pool.test.ts checks the default holds). An operator's own UV_THREADPOOL_SIZE wins.
process.env.UV_THREADPOOL_SIZE ||= "16";

// V8 sets the heap size at which its next full collection starts from the live size and a
// growing factor it derives from recent collection and allocation speeds. After the server has
// idled a few seconds, that factor left less room above the small live heap (~20 MB) than the
// young generation, grown to the offloads' allocation rate, holds; V8 then started a new
// marking cycle right after each full collection: 7-13 of them in a 256 MiB offload that
// followed an idle gap instead of 0-1, with 0.3-0.6 s of CPU on V8's helper threads
// (test/heap-growing.test.ts checks the flag holds). A fixed factor of 3 keeps that room; an
// operator's own flag wins.
if (!process.execArgv.some((arg) => arg.startsWith("--heap-growing-percent"))) {
  const v8 = require("node:v8") as typeof import("node:v8");
  v8.setFlagsFromString("--heap-growing-percent=200");
}
/**
 * This process's soft limit on open files, as `ulimit -n` shows it; undefined if unreadable.
 * The filesystem backend's openFileLimit reads the same line, but it is an ES module, which this
 * CommonJS file cannot load before the check it guards: loading is what runs out of files.
 */
function openFileLimit(): number | undefined {
  try {
    const fs = require("node:fs") as typeof import("node:fs");
    const line = fs
      .readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = Number(line?.split(/\s+/)[3]);
    return Number.isFinite(soft) ? soft : undefined;
  } catch {
    return undefined;
  }
}

// Node's module loader opens the modules' files many at a time: under a limit of about 100 open
// files the start failed part way with EMFILE, or "Cannot find package", and a loader's stack.
// 128 loads and serves (test/open-file-limit.test.ts).
const leastOpenFiles = 128;
const limit = openFileLimit();
if (limit !== undefined && limit < leastOpenFiles) {
  process.stderr.write(
    `spillway: the limit on open files is ${limit} (ulimit -n); spillway needs at least ${leastOpenFiles} to start: raise it, to 1024 or more for a server\n`,
  );
  process.exit(1);
}

// Before @bufbuild/protobuf loads, which picks its base64 encoder once (uint8array-to-base64.ts).
void import("./install-to-base64.js").then(() => import("./cli.js"));

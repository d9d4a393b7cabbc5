#!/usr/bin/env node
// The `spillway` executable. libuv sizes its thread pool from UV_THREADPOOL_SIZE once, when the
// pool first starts, and loading an ES module already starts it: a default set in the CLI's
// own module would come too late. This CommonJS file runs before any of that, so the default
// it sets holds. The pool runs the filesystem backend's file creations and fsyncs; Node's
// default of 4 threads left 32 concurrent small offloads queued behind 4 fsyncs at a time
// (docs/benchmarks.md). An operator's own UV_THREADPOOL_SIZE wins.
process.env.UV_THREADPOOL_SIZE ||= "16";
void import("./cli.js");

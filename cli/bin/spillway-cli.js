#!/usr/bin/env node
// The `spillway-cli` executable as npm links it. npm links a bin only when its file exists at
// install, and in a fresh clone `npm ci` makes the links before the root's `prepare` builds
// dist/, so the bin is this committed file, which runs the built CLI bundle (cli/build.mjs;
// test/workspace-bins.test.ts).
import { runMain } from "../dist/spillway-cli.mjs";

runMain();

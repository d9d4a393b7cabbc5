#!/usr/bin/env node
// The `spillway-mcp-proxy` executable as npm links it: a committed file that runs the built
// CLI, because npm links a bin only when its file exists at install (test/workspace-bins.test.ts).
import { runProxyMain } from "../dist/proxy-cli.js";

runProxyMain();

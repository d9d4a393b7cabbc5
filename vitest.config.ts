import { defineConfig } from "vitest/config";
import { createSummaryReporter } from "./test/support/summary-reporter.js";

// Tests start real servers on loopback; files run in parallel, bounded for 2-core machines.
export default defineConfig({
  test: {
    include: [
      "server/**/*.test.ts",
      "clients/ts/**/*.test.ts",
      "test/**/*.test.ts",
      "conformance/**/*.test.ts",
      "bench/**/*.test.ts",
    ],
    globalSetup: ["./test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 2,
    reporters: ["default", createSummaryReporter()],
  },
});

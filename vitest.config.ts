import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";
import { createSummaryReporter } from "./test/support/summary-reporter.js";

// The workspace packages resolve to their TypeScript sources (the `@spillway/source` export
// condition), so a test sees the code it sits beside without a build.
const conditions = ["@spillway/source", ...defaultServerConditions.filter((c) => c !== "module")];

// Tests start real servers on loopback; files run in parallel, bounded for 2-core machines.
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: [
      "wire/src/**/*.test.ts",
      "clients/ts/src/**/*.test.ts",
      "server/src/**/*.test.ts",
      "conformance/src/**/*.test.ts",
      "test/**/*.test.ts",
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

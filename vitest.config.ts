import { defaultServerConditions } from "vite";
import { configDefaults, defineConfig } from "vitest/config";
import { createSummaryReporter } from "./test/support/summary-reporter.js";

// The workspace packages resolve to their TypeScript sources (the `@spillway/source` export
// condition), so a test sees the code it sits beside without a build.
const conditions = ["@spillway/source", ...defaultServerConditions.filter((c) => c !== "module")];

/** Every test file beside a package's sources. */
const packageTests = [
  "wire/src/**/*.test.ts",
  "clients/ts/src/**/*.test.ts",
  "server/src/**/*.test.ts",
  "conformance/src/**/*.test.ts",
  "mcp/src/**/*.test.ts",
  "cli/src/**/*.test.ts",
  "inspector/src/**/*.test.ts",
  "bench/**/*.test.ts",
];

/** Tests that need the shared MinIO, SeaweedFS and moto servers. */
const storeTests = [
  "server/src/backends/minio.test.ts",
  "server/src/backends/s3.test.ts",
  "conformance/src/conformance.test.ts",
  "test/chunk-reuse.test.ts",
  "test/delete-run.test.ts",
  "test/handles.test.ts",
  "test/lost-payload.test.ts",
  "test/merge-run.test.ts",
  "test/multipart-leftovers.test.ts",
  "test/object-servers.test.ts",
  "test/offload-batch.test.ts",
  "test/offload.test.ts",
  "test/replays.test.ts",
  "test/runs.test.ts",
  "test/search-paging.test.ts",
  "test/store-outage.test.ts",
  "test/store-readiness.test.ts",
  "test/store-stall.test.ts",
  "test/windows.test.ts",
];

/** Deployment-level tests: nginx, SIGKILL and SIGTERM, TLS, process memory and threads. */
const systemTests = [
  "test/crash-consistency.test.ts",
  "test/drain.test.ts",
  "test/heap-growing.test.ts",
  "test/load-balancer.test.ts",
  "test/merge-crash.test.ts",
  "test/replica-killed-mid-call.test.ts",
  "test/object-store-tls.test.ts",
  "test/open-file-limit.test.ts",
  "test/sdk-retries.test.ts",
  "test/sighup-reload.test.ts",
  "test/slow-readers.test.ts",
  "test/sweep-shutdown.test.ts",
  "test/thread-pool.test.ts",
  "test/tls.test.ts",
];

/** Tests beside sources that need compiled code: a package's dist/, or the harness programs. */
const builtPackageTests = [
  "clients/ts/src/sha256-hasher.test.ts",
  "conformance/connectrpc/connectrpc.test.ts",
];

const buildSetup = "./test/global-setup/build.ts";
const objectServerSetup = "./test/global-setup/object-servers.ts";

// The heavy projects share one group bounded to 2 workers for 2-core machines (groups run one
// after another; the unit group runs first, with its own bound).
const heavy = { maxWorkers: 2, sequence: { groupOrder: 1 } };

/**
 * Four projects, each file in exactly one, each with only the global setup it needs:
 * unit (nothing built or started), service (a build), stores and system (a build and the object
 * servers, shared by both).
 */
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    reporters: ["default", createSummaryReporter()],
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: packageTests,
          exclude: [...configDefaults.exclude, ...storeTests, ...builtPackageTests],
          // Mostly waits on loopback sockets and timers: more workers than cores still pays.
          maxWorkers: 4,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "service",
          include: ["test/**/*.test.ts", ...builtPackageTests],
          exclude: [...configDefaults.exclude, ...storeTests, ...systemTests],
          globalSetup: [buildSetup],
          ...heavy,
        },
      },
      {
        extends: true,
        test: {
          name: "stores",
          include: storeTests,
          globalSetup: [buildSetup, objectServerSetup],
          ...heavy,
        },
      },
      {
        extends: true,
        test: {
          name: "system",
          include: systemTests,
          globalSetup: [buildSetup, objectServerSetup],
          ...heavy,
        },
      },
    ],
  },
});

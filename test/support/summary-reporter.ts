import type { Reporter, TestModule } from "vitest/node";

/**
 * createSummaryReporter prints one closing `N passed, N failed` line (plus skipped, which must
 * stay 0 here) so CI logs end with the same summary whatever runner produced them.
 */
export function createSummaryReporter(): Reporter {
  return {
    onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors) {
      let passed = 0;
      let failed = 0;
      let skipped = 0;
      for (const module of testModules) {
        if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++;
        for (const test of module.children.allTests()) {
          const state = test.result().state;
          if (state === "passed") passed++;
          else if (state === "failed") failed++;
          else skipped++;
        }
      }
      failed += unhandledErrors.length;
      process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    },
  };
}

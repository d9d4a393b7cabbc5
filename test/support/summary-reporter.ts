import type { Reporter, TestModule } from "vitest/node";

/**
 * createSummaryReporter prints one closing `N passed, N failed, N skipped` line so CI logs end
 * with the same summary whatever produced them. A file or suite that fails outside any test
 * (an import error, a failing beforeAll) counts as a failure, never as skipped tests only.
 */
export function createSummaryReporter(): Reporter {
  return {
    onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors) {
      let passed = 0;
      let failed = unhandledErrors.length;
      let skipped = 0;
      for (const module of testModules) {
        failed += module.errors().length;
        for (const suite of module.children.allSuites()) failed += suite.errors().length;
        for (const test of module.children.allTests()) {
          const state = test.result().state;
          if (state === "passed") passed++;
          else if (state === "failed") failed++;
          else skipped++;
        }
      }
      process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    },
  };
}

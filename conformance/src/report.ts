import type { CaseResult, ConformanceReport } from "./runner.js";

/**
 * formatResult renders one case, on one line, as `PASS name`, `FAIL name: why`, `SKIP name (why)` or
 * `XFAIL name`.
 */
export function formatResult(r: CaseResult): string {
  switch (r.status) {
    case "pass":
      return `PASS ${r.name}`;
    case "fail":
      // One line per case, whatever the server put in a message.
      return `FAIL ${r.name}: ${(r.detail ?? "failed").replaceAll("\n", "\\n")}`;
    case "skip":
      return `SKIP ${r.name} (${r.detail ?? "skipped"})`;
    case "xfail":
      return `XFAIL ${r.name}`;
  }
}

/**
 * formatSummary renders the closing line: `N passed, N failed, N skipped`, plus
 * `, N known failing` when any case is known to fail.
 */
export function formatSummary(report: ConformanceReport): string {
  const xfail = report.knownFailing > 0 ? `, ${report.knownFailing} known failing` : "";
  return `${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped${xfail}`;
}

import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import type { JsonValue } from "./jsonpath-ast.js";
import { evaluateJsonPath, normalizedPath } from "./jsonpath-eval.js";
import { parseJsonPath } from "./jsonpath-parse.js";

interface CtsCase {
  readonly name: string;
  readonly selector: string;
  readonly document?: JsonValue;
  readonly result?: JsonValue[];
  readonly result_paths?: string[];
  readonly results?: JsonValue[][];
  readonly results_paths?: string[][];
  readonly invalid_selector?: boolean;
}

const folder = new URL("../../../conformance/jsonpath-cts/", import.meta.url);
const cts = JSON.parse(readFileSync(new URL("cts.json", folder), "utf8")) as { tests: CtsCase[] };
const knownFailing = new Map(
  (
    JSON.parse(readFileSync(new URL("known-failing.json", folder), "utf8")) as {
      name: string;
      reason: string;
    }[]
  ).map((k) => [k.name, k.reason]),
);

/** Runs one case; returns why it failed, or undefined when it passed. */
function runCase(test: CtsCase): string | undefined {
  let query: ReturnType<typeof parseJsonPath>;
  try {
    query = parseJsonPath(test.selector);
  } catch (err) {
    if (!(err instanceof ConnectError) || err.code !== Code.InvalidArgument) {
      return `threw ${String(err)}`;
    }
    return test.invalid_selector ? undefined : `refused a valid query: ${err.rawMessage}`;
  }
  if (test.invalid_selector) return "accepted an invalid query";
  const nodes = evaluateJsonPath(query, test.document ?? null);
  const values = nodes.map((n) => n.value);
  const paths = nodes.map((n) => normalizedPath(n.path));
  const expected =
    test.results !== undefined
      ? test.results.map((r, i) => ({ values: r, paths: test.results_paths?.[i] }))
      : [{ values: test.result ?? [], paths: test.result_paths }];
  const ok = expected.some(
    (e) =>
      isDeepStrictEqual(values, e.values) &&
      (e.paths === undefined || isDeepStrictEqual(paths, e.paths)),
  );
  return ok ? undefined : `got ${JSON.stringify(values)} at ${JSON.stringify(paths)}`;
}

describe("JSONPath Compliance Test Suite", () => {
  it("passes every case but the listed known failures", () => {
    const failures: string[] = [];
    const fixed: string[] = [];
    let passed = 0;
    for (const test of cts.tests) {
      const why = runCase(test);
      if (why === undefined) passed++;
      if (knownFailing.has(test.name)) {
        if (why === undefined) fixed.push(test.name);
      } else if (why !== undefined) {
        failures.push(`${test.name} (${test.selector}): ${why}`);
      }
    }
    console.log(`JSONPath CTS: ${passed} of ${cts.tests.length} cases pass`);
    expect(failures).toEqual([]);
    expect(fixed, "known failures that now pass: remove them from known-failing.json").toEqual([]);
  });
});

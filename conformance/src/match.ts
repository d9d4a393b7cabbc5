/**
 * mismatch compares an actual proto-JSON value with a partial expectation and returns a
 * description of the first difference, or undefined when it matches. Objects match when every
 * expected key matches (extra actual keys are ignored); arrays match element by element and
 * in length; `"$present"` and `"$absent"` test presence; a number matches its decimal string
 * (proto JSON writes 64-bit integers as strings).
 */
export function mismatch(expected: unknown, actual: unknown, path = ""): string | undefined {
  const where = path === "" ? "value" : path;
  if (expected === "$present") {
    return actual === undefined || actual === null ? `${where}: missing` : undefined;
  }
  if (expected === "$absent") {
    return actual === undefined || actual === null
      ? undefined
      : `${where}: expected absent, got ${JSON.stringify(actual)}`;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${where}: expected an array, got ${JSON.stringify(actual)}`;
    if (actual.length !== expected.length) {
      return `${where}: expected ${expected.length} items, got ${actual.length}`;
    }
    for (let i = 0; i < expected.length; i++) {
      const m = mismatch(expected[i], actual[i], `${where}[${i}]`);
      if (m !== undefined) return m;
    }
    return undefined;
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) {
      return `${where}: expected an object, got ${JSON.stringify(actual)}`;
    }
    for (const [key, value] of Object.entries(expected)) {
      const m = mismatch(value, (actual as Record<string, unknown>)[key], `${path}.${key}`);
      if (m !== undefined) return m;
    }
    return undefined;
  }
  if (typeof expected === "number" && typeof actual === "string" && String(expected) === actual) {
    return undefined;
  }
  return expected === actual
    ? undefined
    : `${where}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
}

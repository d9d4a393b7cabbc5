import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { BACKEND_FLAGS } from "./backend-config.js";
import { renderFlagReference, withFlagReference } from "./flag-reference.js";
import { spillwayUsage, USAGE_BODY } from "./usage.js";

const operationsPage = new URL("../../docs/operations.md", import.meta.url);

describe("the flag reference in docs/operations.md", () => {
  it("is the text `spillway --help` prints (run scripts/generate-flag-reference.sh when not)", async () => {
    const page = await readFile(operationsPage, "utf8");
    expect(page).toBe(withFlagReference(page));
  });

  it("carries the help text after its version line, every backend flag included", () => {
    expect(spillwayUsage("9.9.9")).toBe(`spillway 9.9.9\n${USAGE_BODY}`);
    const section = renderFlagReference();
    expect(section).toContain(USAGE_BODY.trim());
    for (const [flag, variable] of Object.entries(BACKEND_FLAGS)) {
      expect(section).toContain(`--${flag} `);
      expect(section).toContain(variable);
    }
  });

  it("refuses a page without the markers", () => {
    expect(() => withFlagReference("# Operations\n")).toThrow(/markers/);
  });
});

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../server/src/metrics.js";

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const rules = here("../docs/alerts/spillway.rules.yml");
const ruleTests = here("../docs/alerts/spillway.rules.test.yml");

/** Runs promtool; its output, or a failure carrying what it printed. */
function promtool(bin: string, args: readonly string[]): string {
  try {
    return execFileSync(bin, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(" ")} failed:\n${stdout ?? ""}${stderr ?? ""}`);
  }
}

describe("the shipped Prometheus alert rules (docs/alerts/spillway.rules.yml)", () => {
  let bin: string;
  beforeAll(() => {
    // Builds the pinned promtool once (minutes), then answers from the cache at once.
    const out = execFileSync("bash", [here("../scripts/install-promtool.sh")], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    });
    bin = out.trim().split("\n").at(-1) ?? "";
  }, 1_800_000);

  it("are valid rules with valid PromQL (promtool check rules)", () => {
    const out = promtool(bin, ["check", "rules", rules]);
    expect(out).toContain("SUCCESS: 9 rules found");
  });

  it("page on server faults, never on a client's wrong digest (promtool test rules)", () => {
    const out = promtool(bin, ["test", "rules", ruleTests]);
    expect(out).toContain("SUCCESS");
  });

  it("name only metrics the server exports", async () => {
    const exported = new Set(
      (await createMetrics().registry.getMetricsAsJSON()).map((metric) => metric.name),
    );
    const named = [
      ...readFileSync(rules, "utf8").matchAll(/\b(?:grpc_server|spillway)_[a-z0-9_]+\b/g),
    ].map(([name]) => name.replace(/_(bucket|count|sum)$/, ""));
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((name) => !exported.has(name))).toEqual([]);
  });
});

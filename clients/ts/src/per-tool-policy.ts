import { Code, ConnectError } from "@connectrpc/connect";
import type { ElisionPolicy, ElisionPolicyOptions } from "./elision-policy.js";
import { readToolOutputToolName } from "./read-tool-output-tool.js";
import { createToolFilter, pickToolPattern, validateToolPattern } from "./tool-name-pattern.js";

/** hasToolRules says whether opts use perTool, include or exclude. */
export function hasToolRules(opts: ElisionPolicyOptions): boolean {
  return opts.perTool !== undefined || opts.include !== undefined || opts.exclude !== undefined;
}

/**
 * createPerToolPolicy is the policy of opts with tool rules: for each result it applies the
 * policy its tool gets — the one of the perTool key that decides for the tool name (see
 * pickToolPattern), else the one of opts' own bands and budget — or, for a tool include leaves
 * out or exclude names, a policy whose one band passes everything through. Each of those is
 * made once, here, by create (createElisionPolicy) from opts without the tool rules, so every
 * option is validated when the policy is made (INVALID_ARGUMENT).
 */
export function createPerToolPolicy(
  opts: ElisionPolicyOptions,
  create: (opts: ElisionPolicyOptions) => ElisionPolicy,
): ElisionPolicy {
  const { perTool, include, exclude, ...shared } = opts;
  const filter = createToolFilter(include, exclude);
  const byDefault = create(shared);
  const untouched = create({ ...shared, bands: [{ action: "passthrough" }] });
  const byPattern = new Map<string, ElisionPolicy>();
  for (const [pattern, override] of Object.entries(perTool ?? {})) {
    validateToolPattern(pattern);
    if (typeof override !== "object" || override === null || Array.isArray(override)) {
      throw new ConnectError(
        `elision policy: perTool["${pattern}"] must be { bands?, truncateBudget? }`,
        Code.InvalidArgument,
      );
    }
    byPattern.set(
      pattern,
      create({
        ...shared,
        ...(override.bands === undefined ? {} : { bands: override.bands }),
        ...(override.truncateBudget === undefined
          ? {}
          : { truncateBudget: override.truncateBudget }),
      }),
    );
  }
  return {
    apply(input) {
      // read_tool_output's windows pass through whatever the rules say; the policy knows them.
      if (input.toolName === readToolOutputToolName) return byDefault.apply(input);
      if (!filter.applies(input.toolName)) return untouched.apply(input);
      const pattern = pickToolPattern(byPattern.keys(), input.toolName ?? "");
      const policy = (pattern === undefined ? undefined : byPattern.get(pattern)) ?? byDefault;
      return policy.apply(input);
    },
  };
}

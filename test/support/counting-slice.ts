import type { CpuSlice } from "../../server/src/cpu-turns.js";

/**
 * countingSlice is a CpuSlice that never makes work wait and counts how often it was asked:
 * how many pieces a window handed its turns, for tests that check work is cut into slices.
 */
export function countingSlice(): CpuSlice & { readonly pauses: () => number } {
  let pauses = 0;
  return {
    pause: () => {
      pauses++;
      return undefined;
    },
    pauses: () => pauses,
  };
}

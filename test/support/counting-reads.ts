import type { Backend } from "../../server/src/backends/backend.js";

/**
 * countingReads decorates a backend so every byte its `get` streams yield is reported to
 * `onBytes`: how tests tell how much of a payload a call read.
 */
export function countingReads(onBytes: (bytes: number) => void): (base: Backend) => Backend {
  return (base) => ({
    ...base,
    async get(key, opts) {
      const body = await base.get(key, opts);
      return (async function* () {
        for await (const chunk of body) {
          onBytes(chunk.length);
          yield chunk;
        }
      })();
    },
  });
}

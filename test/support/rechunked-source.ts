import type { WindowSource } from "../../server/src/window/source.js";

/**
 * rechunked wraps a window source so its reads come back in chunks of the given sizes (cycled),
 * whatever the source's own chunking: window code must give the same answer for any of them.
 */
export function rechunked(source: WindowSource, sizes: readonly number[]): WindowSource {
  return {
    ...source,
    read: async (offset, length, signal) => {
      const inner = await source.read(offset, length, signal);
      return (async function* () {
        const all: Uint8Array[] = [];
        for await (const chunk of inner) all.push(chunk);
        const bytes = Buffer.concat(all);
        let at = 0;
        for (let k = 0; at < bytes.length; k++) {
          const size = sizes[k % sizes.length] ?? 1;
          yield bytes.subarray(at, at + size);
          at += size;
        }
      })();
    },
  };
}

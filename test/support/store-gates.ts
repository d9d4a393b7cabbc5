import type { Backend } from "../../server/src/backends/backend.js";

/** A Gate holds one store call: `reached` resolves when it arrives, `open` lets it go on. */
export interface Gate {
  readonly reached: Promise<void>;
  open(): void;
}

/**
 * storeGates holds chosen store writes and deletes until the test opens them, to pin an
 * interleaving of concurrent calls. `wrap` decorates a backend (put, putMany, deleteMany);
 * `at(part)` holds the next such call whose keys contain `part`, once.
 */
export function storeGates() {
  const gates = new Map<string, { gate: Gate; pass: () => Promise<void> }>();
  const hold = async (keys: readonly string[]) => {
    for (const [part, held] of gates) {
      if (!keys.some((key) => key.includes(part))) continue;
      gates.delete(part);
      await held.pass();
    }
  };
  return {
    wrap: (base: Backend): Backend => ({
      ...base,
      put: async (key, body, opts) => {
        await hold([key]);
        return base.put(key, body, opts);
      },
      ...(base.putMany === undefined
        ? {}
        : {
            putMany: async (keys, body, opts) => {
              await hold(keys);
              return base.putMany?.(keys, body, opts) ?? [];
            },
          }),
      deleteMany: async (keys, opts) => {
        await hold(keys);
        return base.deleteMany(keys, opts);
      },
    }),
    at(part: string): Gate {
      let open: () => void = () => undefined;
      let arrived: () => void = () => undefined;
      const opened = new Promise<void>((r) => {
        open = r;
      });
      const reached = new Promise<void>((r) => {
        arrived = r;
      });
      gates.set(part, {
        gate: { reached, open },
        pass: async () => {
          arrived();
          await opened;
        },
      });
      return { reached, open };
    },
  };
}

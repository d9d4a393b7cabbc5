import type { Backend } from "../../server/src/backends/backend.js";

/** A Gate holds one store call: `reached` resolves when it arrives, `open` lets it go on. */
export interface Gate {
  readonly reached: Promise<void>;
  open(): void;
}

/** A gate that `pass` waits at until it is opened, once it has said it was reached. */
function createGate(): { gate: Gate; pass: () => Promise<void> } {
  let open: () => void = () => undefined;
  let arrived: () => void = () => undefined;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  const reached = new Promise<void>((r) => {
    arrived = r;
  });
  return {
    gate: { reached, open },
    pass: async () => {
      arrived();
      await opened;
    },
  };
}

/**
 * storeGates holds chosen store writes and deletes until the test opens them, to pin an
 * interleaving of concurrent calls. `wrap` decorates a backend (put, putMany and deleteMany;
 * delete for `atDelete`, get for `beforeRead` and `afterRead`); `at(part)` holds the next such write or batch
 * delete whose keys contain `part`, once; `atDelete(part)` the next single-key delete of such a
 * key; `beforeRead(part)` the next get of such a key before it opens anything;
 * `afterRead(part)` the next get of such a key once it has opened what it reads, before its
 * caller reads it.
 */
export function storeGates() {
  type Held = Map<string, { gate: Gate; pass: () => Promise<void> }>;
  const writes: Held = new Map();
  const deletes: Held = new Map();
  const beforeReads: Held = new Map();
  const afterReads: Held = new Map();
  const holdIn = async (held: Held, keys: readonly string[]) => {
    for (const [part, gate] of held) {
      if (!keys.some((key) => key.includes(part))) continue;
      held.delete(part);
      await gate.pass();
    }
  };
  const arm = (held: Held, part: string): Gate => {
    const made = createGate();
    held.set(part, made);
    return made.gate;
  };
  const hold = (keys: readonly string[]) => holdIn(writes, keys);
  return {
    wrap: (base: Backend): Backend => ({
      ...base,
      get: async (key, opts) => {
        await holdIn(beforeReads, [key]);
        const body = await base.get(key, opts);
        await holdIn(afterReads, [key]);
        return body;
      },
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
      delete: async (key, opts) => {
        await holdIn(deletes, [key]);
        return base.delete(key, opts);
      },
    }),
    at: (part: string): Gate => arm(writes, part),
    /** Holds the next single-key delete of a key containing `part`, once. */
    atDelete: (part: string): Gate => arm(deletes, part),
    /** Holds the next get of a key containing `part` before it opens anything, once. */
    beforeRead: (part: string): Gate => arm(beforeReads, part),
    /** Holds the next get of a key containing `part` once it has opened it, once. */
    afterRead: (part: string): Gate => arm(afterReads, part),
  };
}

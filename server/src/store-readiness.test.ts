import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createMemoryBackend } from "./backends/memory.js";
import { pokeOnStoreFault } from "./backends/poke-on-store-fault.js";
import { createStoreReadiness } from "./store-readiness.js";

describe("store readiness", () => {
  it("reports only flips, from usable, and never rejects", async () => {
    let fail = false;
    const changes: boolean[] = [];
    const readiness = createStoreReadiness({
      probe: async () => {
        if (fail) throw new ConnectError("store down", Code.Unavailable);
      },
      intervalMs: 60_000,
      onChange: (usable) => changes.push(usable),
    });
    expect(await readiness.check()).toBe(true);
    fail = true;
    expect(await readiness.check()).toBe(false);
    expect(await readiness.check()).toBe(false);
    fail = false;
    expect(await readiness.check()).toBe(true);
    expect(changes).toEqual([false, true]);
  });

  it("turns a storm of failures into one probe, not one per failure", async () => {
    let probes = 0;
    let probed: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      probed = resolve;
    });
    const readiness = createStoreReadiness({
      probe: async () => {
        probes++;
        probed();
      },
      intervalMs: 60_000,
      onChange: () => {},
    });
    const backend = pokeOnStoreFault(
      {
        ...createMemoryBackend(),
        head: async () => {
          throw new ConnectError("store down", Code.Unavailable);
        },
      },
      () => readiness.poke(),
    );
    await Promise.allSettled(Array.from({ length: 100 }, () => backend.head("t/a")));
    await done;
    expect(probes).toBe(1);
    readiness.stop();
  });
});

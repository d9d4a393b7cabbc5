import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createMemoryBackend } from "./memory.js";
import { pokeOnStoreFault } from "./poke-on-store-fault.js";

describe("pokeOnStoreFault", () => {
  it("does not probe for the contract's own answers", async () => {
    let pokes = 0;
    const backend = pokeOnStoreFault(createMemoryBackend(), () => {
      pokes++;
    });
    expect(await backend.head("t/missing")).toBeUndefined();
    await expect(backend.get("t/missing")).rejects.toMatchObject({ code: Code.NotFound });
    await expect(backend.list("../x")).rejects.toMatchObject({ code: Code.InvalidArgument });
    expect(pokes).toBe(0);
  });
});

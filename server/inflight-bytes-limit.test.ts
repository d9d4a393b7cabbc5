import { Code, ConnectError, type StreamRequest, type StreamResponse } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createInflightBytesLimit } from "./inflight-bytes-limit.js";

describe("createInflightBytesLimit", () => {
  it("refuses a limit that no single call fits under, naming it", () => {
    let err: unknown;
    try {
      createInflightBytesLimit(1000, { offload: 2000, read: 500 });
    } catch (e) {
      err = e;
    }
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(err).rawMessage).toBe(
      "max_inflight_bytes 1000 is below the 2000 bytes one call reserves; use 0 to turn it off",
    );
  });

  it("turns the limit off at 0: however many calls are held, none is refused", async () => {
    const weights = { offload: 2000, read: 500 };
    const req = { method: { name: "Offload" } } as unknown as StreamRequest;
    // A streamed response nobody reads holds its reservation until the test ends.
    const next = async (): Promise<StreamResponse> =>
      ({
        stream: true,
        message: (async function* () {
          await new Promise(() => {});
        })(),
      }) as unknown as StreamResponse;
    const off = createInflightBytesLimit(0, weights)(next);
    for (let i = 0; i < 1000; i++) await off(req);
    // The same load against a limit of two offloads: the third is refused.
    const on = createInflightBytesLimit(4000, weights)(next);
    await on(req);
    await on(req);
    const err = await on(req).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
  });
});

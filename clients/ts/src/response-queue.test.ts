import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { GetServerInfoResponseSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { codeThrownBy } from "../../../test/support/code-of.js";
import { createResponseQueue } from "./response-queue.js";

const info = (version: string) =>
  toBinary(GetServerInfoResponseSchema, create(GetServerInfoResponseSchema, { version }));

describe("createResponseQueue", () => {
  it("hands out messages in order, then the error it was closed with", async () => {
    const queue = createResponseQueue(GetServerInfoResponseSchema, undefined, () => {});
    queue.push(info("a"));
    queue.push(info("b"));
    queue.close(new ConnectError("gone", Code.Unavailable));
    const seen: string[] = [];
    const err = await (async () => {
      for await (const m of queue.messages) seen.push(m.version);
    })().catch((e: unknown) => ConnectError.from(e));
    expect(seen).toEqual(["a", "b"]);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
  });

  it("says when it is full and resumes its source below half", async () => {
    let resumed = 0;
    const queue = createResponseQueue(GetServerInfoResponseSchema, undefined, () => resumed++);
    const room: boolean[] = [];
    for (let i = 0; i < 256; i++) room.push(queue.push(info(String(i))));
    expect(room.indexOf(false)).toBe(255);
    const it = queue.messages[Symbol.asyncIterator]();
    for (let i = 0; i < 128; i++) await it.next();
    expect(resumed).toBe(0);
    await it.next();
    expect(resumed).toBe(1);
  });

  it("refuses a message that does not parse as INTERNAL", () => {
    const queue = createResponseQueue(GetServerInfoResponseSchema, undefined, () => {});
    expect(codeThrownBy(() => queue.push(Uint8Array.of(0x0a, 0x7f, 0x01)))).toBe(Code.Internal);
  });
});

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { faultOf } from "../call-fault.js";
import { bytesBody } from "./body.js";
import { createFilesystemBackend } from "./filesystem.js";
import { markStoreFaults } from "./mark-store-faults.js";
import { createMemoryBackend } from "./memory.js";

/** What a call rejected with. */
async function rejection(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call succeeded");
}

describe("markStoreFaults", () => {
  it("marks a broken store's FAILED_PRECONDITION as the server's fault", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-mark-"));
    try {
      const root = join(dir, "store");
      const backend = markStoreFaults(createFilesystemBackend({ root }));
      await backend.put("t/first", bytesBody(Buffer.from("x")));
      // Then a file where the store's root directory should be.
      await rm(root, { recursive: true });
      await writeFile(root, "not a directory");
      const err = await rejection(backend.put("t/a", bytesBody(Buffer.from("x"))));
      expect(err.code).toBe(Code.FailedPrecondition);
      expect(faultOf(err)).toBe("server");
      // The same code raised by the server itself about a request stays the client's.
      expect(faultOf(new ConnectError("preview only", Code.FailedPrecondition))).toBe("client");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("leaves a failure of the caller's own upload body to the client", async () => {
    const backend = markStoreFaults(createMemoryBackend());
    async function* oversize(): AsyncGenerator<Uint8Array> {
      yield new Uint8Array(1);
      throw new ConnectError("payload exceeds max_blob_bytes 1", Code.ResourceExhausted);
    }
    const err = await rejection(backend.put("t/b", oversize()));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(faultOf(err)).toBe("client");
  });

  it("keeps the contract's answers as they are", async () => {
    const backend = markStoreFaults(createMemoryBackend());
    await backend.put("t/c", bytesBody(Buffer.from("x")));
    const taken = await rejection(backend.put("t/c", bytesBody(Buffer.from("y"))));
    expect(taken.code).toBe(Code.AlreadyExists);
    expect(faultOf(taken)).toBe("client");
    expect(faultOf(await rejection(backend.get("t/missing")))).toBe("client");
  });

  it("marks a store's refusal when it is closed as the server's fault", async () => {
    const base = createMemoryBackend();
    const backend = markStoreFaults({
      ...base,
      close: async () => {
        throw new ConnectError("credentials revoked", Code.PermissionDenied);
      },
    });
    const err = await rejection(backend.close());
    expect(err.code).toBe(Code.PermissionDenied);
    expect(faultOf(err)).toBe("server");
  });
});

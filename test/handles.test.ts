import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recommit } from "../server/src/record.js";
import { failureOf } from "./support/code-of.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

const A = "token-a";
const B = "token-b";

describe.each(serviceBackends)(
  "handles resolve only through the reading run's registry  (%s)",
  (backendKind) => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({ backend: backendKind, tokens: { [A]: "ta", [B]: "tb" } });
      const a = t.sdk(A);
      await a.offload({ tenant: "ta", runId: "run1", callId: "call1" }, "run1 secret\n");
      await a.offload({ tenant: "ta", runId: "run1", callId: "call1" }, "stdout text\n", {
        slot: "stdout",
      });
      await a.offload({ tenant: "ta", runId: "run2", callId: "call2" }, "run2 secret\n");
      await t.sdk(B).offload({ tenant: "tb", runId: "run1", callId: "call9" }, "tenant b\n");
    });
    afterAll(() => t.stop());

    async function denial(token: string, runId: string, handle: string) {
      try {
        const w = await t.sdk(token).readToolOutput({ runId, handle });
        return { leaked: w.rendered };
      } catch (err) {
        const e = ConnectError.from(err);
        return {
          code: e.code,
          reason: e.findDetails(ErrorInfoSchema)[0]?.reason,
          message: e.rawMessage,
        };
      }
    }

    it("reads a recorded result and a recorded attachment", async () => {
      const w = await t.sdk(A).readToolOutput({ runId: "run1", handle: "res_call1" });
      expect(w.rendered).toContain("run1 secret");
      const s = await t.sdk(A).readToolOutput({ runId: "run1", handle: "out_call1_stdout" });
      expect(s.rendered).toContain("stdout text");
    });

    it.each([
      ["an unknown handle", A, "run1", "res_nope"],
      ["a handle of another run", A, "run1", "res_call2"],
      ["a made-up attachment handle in the right format", A, "run1", "out_call1_stderr"],
      ["another tenant's handle in a run of the same name", A, "run1", "res_call9"],
      ["our handle read by another tenant", B, "run1", "res_call1"],
      ["a storage path as a handle", A, "run1", "../run2/h/res_call2"],
      ["an encoded traversal", A, "run1", "..%2Frun2%2Fh%2Fres_call2"],
      ["a run that does not exist", A, "ghost", "res_call1"],
    ])(
      "refuses %s with PERMISSION_DENIED invalid_deferred_handle and no bytes",
      async (_, token, run, handle) => {
        const result = await denial(token, run, handle);
        expect(result).toMatchObject({
          code: Code.PermissionDenied,
          reason: "invalid_deferred_handle",
        });
        expect(result.message).not.toContain("secret");
      },
    );

    it("gives two keys whose handles once collided their own handles and bytes", async () => {
      const a = t.sdk(A);
      // Call `a` with slot `file:x_stdout` and call `a_file:x` with slot `stdout` both read as
      // `out_a_file:x_stdout` when the slot's `_` was kept.
      const keys = [
        { callId: "a", slot: "file:x_stdout", text: "the file x_stdout of call a\n" },
        { callId: "a_file:x", slot: "stdout", text: "the stdout of call a_file:x\n" },
      ];
      const committed = [];
      for (const k of keys) {
        committed.push(
          await a.offloadResult({ tenant: "ta", runId: "run3", callId: k.callId }, k.text, {
            slot: k.slot,
          }),
        );
      }
      expect(committed.map((c) => c.created)).toEqual([true, true]);
      const handles = committed.map((c) => c.attachment.handle);
      expect(handles).toEqual(["out_a_file:x%5Fstdout", "out_a_file:x_stdout"]);
      for (const [i, k] of keys.entries()) {
        const handle = handles[i] ?? "";
        const chunks: Uint8Array[] = [];
        for await (const chunk of a.readBytes("run3", handle)) chunks.push(chunk);
        const bytes = Buffer.concat(chunks);
        expect(bytes.toString("utf8")).toBe(k.text);
        const stat = await a.stat("run3", handle);
        expect([stat.key?.callId, stat.slot]).toEqual([k.callId, k.slot]);
      }
    });

    it("never hands a key the record of another key that holds its handle from before", async () => {
      const a = t.sdk(A);
      const text = "the file x_stdout of call a\n";
      const own = await a.offloadResult({ tenant: "ta", runId: "run4", callId: "a" }, text, {
        slot: "file:x_stdout",
      });
      const stored = await t.server.core.registry.get("ta", "run4", own.attachment.handle);
      if (stored === undefined) throw new Error("the record just committed is missing");
      // A record committed before file slots escaped `_` holds the handle call `a_file:x`'s
      // stdout now gets.
      await t.server.core.registry.commit(
        { ...recommit(stored), handle: "out_a_file:x_stdout" },
        "run4",
      );
      const err = await failureOf(
        a.offload({ tenant: "ta", runId: "run4", callId: "a_file:x" }, text, { slot: "stdout" }),
      );
      expect(err.code).toBe(Code.AlreadyExists);
      expect(err.rawMessage).toMatch(/another key/);
      const stat = await a.stat("run4", "out_a_file:x_stdout");
      expect([stat.key?.callId, stat.slot]).toEqual(["a", "file:x_stdout"]);
    });

    it("reads and stats an attachment whose handle is as long as the longest key makes it", async () => {
      const a = t.sdk(A);
      // The longest call id and a slot of the longest length made of `_`, which the handle
      // escapes to three bytes each: the handle is 1,659 bytes.
      const key = { tenant: "ta", runId: "run5", callId: "c".repeat(128) };
      const slot = `file:${"_".repeat(507)}`;
      const { attachment } = await a.offloadResult(key, "longest handle\n", { slot });
      expect(Buffer.byteLength(attachment.handle)).toBe(4 + 128 + 1 + 5 + 507 * 3);
      const w = await a.readToolOutput({ runId: "run5", handle: attachment.handle });
      expect(w.rendered).toContain("longest handle");
      const stat = await a.stat("run5", attachment.handle);
      expect(stat.slot).toBe(slot);
    });

    it.each([
      ["a NUL", "res_call1\u0000"],
      ["a newline", "res_call1\n"],
      ["an escape sequence", "res_\u001b[2Jcall1"],
    ])("refuses a handle with %s as INVALID_ARGUMENT, never echoing it", async (_, handle) => {
      const err = await failureOf(t.raw(A).statToolOutput({ runId: "run1", handle }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(/^handle: /);
      expect(err.rawMessage).not.toContain("call1");
    });

    it("refuses the same handles on StatToolOutput", async () => {
      const err = await t
        .raw(A)
        .statToolOutput({ runId: "run1", handle: "res_call2" })
        .catch((e: unknown) => ConnectError.from(e));
      expect((err as ConnectError).code).toBe(Code.PermissionDenied);
      expect((err as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe(
        "invalid_deferred_handle",
      );
    });
  },
);

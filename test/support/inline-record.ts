import { type NewRecord, toBase64 } from "../../server/src/record.js";

/**
 * inlineRecord returns a one-line text record of `text` stored inline under `res_<callId>`, as
 * an offload of that text would commit it (its sha256 left empty: nothing here checks it),
 * created at `createdMs`.
 */
export function inlineRecord(
  tenant: string,
  runId: string,
  callId: string,
  text: string,
  createdMs: number,
): NewRecord {
  return {
    v: 1,
    handle: `res_${callId}`,
    tenant,
    runId,
    callId,
    name: "",
    contentType: "text/plain",
    sizeBytes: Buffer.byteLength(text),
    observedBytes: Buffer.byteLength(text),
    truncated: false,
    stored: "inline",
    sha256: "",
    binary: false,
    lineCount: 1,
    preview: { head: text, tail: "", shape: "", omittedBytes: 0, text },
    createdMs,
    inline: toBase64(Buffer.from(text)),
  };
}

import { create } from "@bufbuild/protobuf";
import { type Any, anyPack, anyUnpack } from "@bufbuild/protobuf/wkt";
import { type Code, ConnectError } from "@connectrpc/connect";
import {
  type Error as ConformanceError,
  ConformancePayload_RequestInfoSchema,
  ErrorSchema,
  type Header,
  HeaderSchema,
} from "./gen/connectrpc/conformance/v1/service_pb.js";

/** toProtoHeaders returns fetch headers as the conformance protocol's headers, one per name. */
export function toProtoHeaders(headers: Headers): Header[] {
  const out: Header[] = [];
  headers.forEach((value, name) => {
    out.push(create(HeaderSchema, { name, value: [value] }));
  });
  return out;
}

/** appendProtoHeaders adds every value of the conformance protocol's headers to `headers`. */
export function appendProtoHeaders(headers: Headers, from: readonly Header[]): void {
  for (const header of from) {
    for (const value of header.value) headers.append(header.name, value);
  }
}

/**
 * toConnectError returns the error a conformance response definition asks for. Its details are
 * RequestInfo messages (the only kind the suite sends); another kind throws.
 */
export function toConnectError(err: ConformanceError): ConnectError {
  return new ConnectError(
    err.message ?? "",
    err.code as number as Code,
    undefined,
    err.details.map((detail) => {
      const info = anyUnpack(detail, ConformancePayload_RequestInfoSchema);
      if (info === undefined) throw new Error(`cannot unpack error detail ${detail.typeUrl}`);
      return { desc: ConformancePayload_RequestInfoSchema, value: info };
    }),
  );
}

/** fromConnectError returns a call's error as the conformance protocol reports it. */
export function fromConnectError(err: ConnectError): ConformanceError {
  const details: Any[] = err.details.map((detail) =>
    "desc" in detail
      ? anyPack(detail.desc, create(detail.desc, detail.value))
      : {
          $typeName: "google.protobuf.Any",
          typeUrl: `type.googleapis.com/${detail.type}`,
          value: detail.value,
        },
  );
  return create(ErrorSchema, { code: err.code as number, message: err.rawMessage, details });
}

/** delay resolves after ms milliseconds (at once for 0). */
export function delay(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}

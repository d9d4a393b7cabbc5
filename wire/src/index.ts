/**
 * The gRPC wire pieces Spillway's server and client share, as named re-exports: the gRPC
 * envelope reader, the bytes-field wire, the data-frame path, HTTP/2 error mapping, header
 * conversion between Node and fetch Headers, what names the loopback (DNS-rebinding checks), and the terminal escape grammar model-facing text
 * is stripped of.
 */

export {
  type AnsiSequence,
  type AnsiUnits,
  ansiSequenceAt,
  byteUnits,
  hasAnsi,
  maxAnsiSequenceChars,
  startsAnsiSequence,
  stripAnsi,
} from "./ansi-escapes.js";
export { bytesFieldPrefix, envelopeHeaderBytes, wireBytesField } from "./bytes-field-wire.js";
export { dataFrame, dataFramePath } from "./data-frame.js";
export {
  type BytesFieldPiece,
  createEnvelopeReader,
  type EnvelopeReader,
  type EnvelopeReaderOptions,
  type TrailerFrame,
} from "./envelope-reader.js";
export { fromHttp2Error, fromResetCode } from "./http2-error.js";
export { isLoopbackHostHeader, isLoopbackName } from "./loopback-name.js";
export { toHeaders, toNodeHeaders } from "./node-headers.js";
export { statusName } from "./status-name.js";

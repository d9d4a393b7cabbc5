import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { Client, Interceptor, Transport } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type OffloadHeader,
  OffloadHeaderSchema,
  OffloadRequestSchema,
  type ReadToolOutputRequest,
  type ReadToolOutputRequestSchema,
  type ReadToolOutputResponse,
  SpillwayService,
  type WindowHeader,
  type WindowTrailer,
} from "./gen/spillway/v1/spillway_pb.js";
import type { BlobKey, ResultAttachment } from "./gen/spillway/v1/types_pb.js";

/** SpillwayClientOptions configure createSpillwayClient. */
export interface SpillwayClientOptions {
  /** Server URL, e.g. `http://127.0.0.1:50051`. */
  readonly baseUrl: string;
  /** Bearer token; omit for a dev-mode server. */
  readonly token?: string;
  /** A ready transport (for gRPC-Web or custom settings); baseUrl is then ignored. */
  readonly transport?: Transport;
}

/** OffloadData is anything offload accepts: bytes, text, a JSON value, or a byte stream. */
export type OffloadData = Uint8Array | string | AsyncIterable<Uint8Array> | { json: unknown };

/** OffloadOptions are the header fields besides the key. */
export type OffloadOptions = Omit<
  Exclude<MessageInitShape<typeof OffloadHeaderSchema>, OffloadHeader>,
  "key" | "$typeName"
>;

/** ReadToolOutputInit is a ReadToolOutput request as plain fields. */
export type ReadToolOutputInit = Exclude<
  MessageInitShape<typeof ReadToolOutputRequestSchema>,
  ReadToolOutputRequest
> & { runId: string; handle: string };

/** Window is a whole ReadToolOutput answer, collected. */
export interface Window {
  readonly header: WindowHeader | undefined;
  readonly frames: ReadToolOutputResponse[];
  readonly trailer: WindowTrailer | undefined;
  /** The server-rendered text to show the model. */
  readonly rendered: string;
}

/** SpillwayClient is the thin SDK over the generated client. */
export interface SpillwayClient {
  /** The generated Connect client, for calls the SDK does not wrap. */
  readonly raw: Client<typeof SpillwayService>;
  /** Offloads data to key (streamed in 1 MiB chunks) and returns the committed record. */
  offload(
    key: Omit<BlobKey, "$typeName">,
    data: OffloadData,
    options?: OffloadOptions,
  ): Promise<ResultAttachment>;
  /** Reads one window and collects it. */
  readToolOutput(
    request: MessageInitShape<typeof ReadToolOutputRequestSchema> & {
      runId: string;
      handle: string;
    },
  ): Promise<Window>;
}

const CHUNK_BYTES = 1024 * 1024;

/** createSpillwayClient connects to a Spillway server over gRPC (HTTP/2). */
export function createSpillwayClient(opts: SpillwayClientOptions): SpillwayClient {
  const auth: Interceptor = (next) => (req) => {
    if (opts.token !== undefined) req.header.set("authorization", `Bearer ${opts.token}`);
    return next(req);
  };
  const transport =
    opts.transport ??
    createGrpcTransport({
      baseUrl: opts.baseUrl,
      interceptors: [auth],
      readMaxBytes: 64 * 1024 * 1024,
      // A large per-stream receive window lets a bulk read run at wire speed.
      nodeOptions: { settings: { initialWindowSize: 32 * 1024 * 1024 } },
    });
  const raw = createClient(SpillwayService, transport);
  return {
    raw,
    async offload(key, data, options = {}) {
      const header = { ...options, key };
      const res = await raw.offload(requests(header, data));
      if (res.attachment === undefined) throw new Error("server returned no attachment");
      return res.attachment;
    },
    async readToolOutput(request) {
      const frames: ReadToolOutputResponse[] = [];
      let header: WindowHeader | undefined;
      let trailer: WindowTrailer | undefined;
      for await (const frame of raw.readToolOutput(request)) {
        frames.push(frame);
        if (frame.frame.case === "header") header = frame.frame.value;
        if (frame.frame.case === "trailer") trailer = frame.frame.value;
      }
      return { header, frames, trailer, rendered: trailer?.rendered ?? "" };
    },
  };
}

async function* requests(
  header: OffloadOptions & { key: Omit<BlobKey, "$typeName"> },
  data: OffloadData,
) {
  yield create(OffloadRequestSchema, {
    msg: { case: "header", value: create(OffloadHeaderSchema, header) },
  });
  for await (const chunk of chunks(data)) {
    yield create(OffloadRequestSchema, { msg: { case: "chunk", value: chunk } });
  }
}

async function* chunks(data: OffloadData): AsyncGenerator<Uint8Array> {
  if (typeof data === "string" || data instanceof Uint8Array || "json" in data) {
    const bytes =
      typeof data === "string"
        ? Buffer.from(data, "utf8")
        : data instanceof Uint8Array
          ? data
          : Buffer.from(JSON.stringify(data.json), "utf8");
    for (let i = 0; i < bytes.byteLength; i += CHUNK_BYTES) {
      yield bytes.subarray(i, i + CHUNK_BYTES);
    }
    return;
  }
  yield* data;
}

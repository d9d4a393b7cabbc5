import { Readable } from "node:stream";
import type {
  _Object,
  S3ClientConfig,
  ServiceInputTypes,
  ServiceOutputTypes,
} from "@aws-sdk/client-s3";
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { Code, ConnectError } from "@connectrpc/connect";
import { crc32 } from "@node-rs/crc32";
import type { AwsCredentialIdentity, BuildMiddleware, MetadataBearer } from "@smithy/types";
import type {
  Backend,
  BackendCallOptions,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
} from "./backend.js";
import { abortableBody, emptyBody, responseBody, throwIfAborted } from "./body.js";
import { checkListLimit, checkRange, sweepCutoffMs } from "./call-options.js";
import { createChunkPool } from "./chunk-pool.js";
import { fromS3Error } from "./from-s3-error.js";
import { alreadyExists, notFound } from "./object-errors.js";
import { checkKey, checkListPrefix, checkRootPrefix } from "./object-key.js";
import { checkPartSize, maxParts, s3BatchLimit } from "./s3-limits.js";
import {
  boundStoreRequest,
  checkStoreRequestTimeout,
  storeIdleBound,
} from "./s3-request-timeout.js";
import { ensureIncompleteUploadExpiry } from "./s3-upload-lifecycle.js";

/** Parts a multipart upload keeps in flight by default. */
const defaultQueueSize = 4;

/** S3BackendOptions configure createS3Backend. */
export interface S3BackendOptions {
  /** Bucket that holds every object; it must already exist. */
  readonly bucket: string;
  /** Key prefix inside the bucket (`<prefix>/<key>`), by the key rules; a final `/` is optional. */
  readonly prefix?: string;
  /** Endpoint URL of an S3-compatible store; unset uses AWS S3 for the region. */
  readonly endpoint?: string;
  /** Signing region. Default `us-east-1`. */
  readonly region?: string;
  /** Path-style URLs (`<endpoint>/<bucket>/<key>`), which most S3-compatible stores need. */
  readonly forcePathStyle?: boolean;
  /** Fixed credentials, for tests; production leaves this unset and uses the default chain. */
  readonly credentials?: AwsCredentialIdentity;
  /** Multipart part size, 5 MiB to 5 GiB; a body up to it is one PutObject. Default 8 MiB. */
  readonly partSizeBytes?: number;
  /** Parts uploaded concurrently. Default 4. */
  readonly queueSize?: number;
  /**
   * Whether SigV4 signs a sha256 of every body (PutObject, UploadPart) besides its headers.
   * Default false: bodies go as `UNSIGNED-PAYLOAD`, checked by the CRC32 header the signature
   * covers, which saves hashing every byte a second time (Spillway hashes it for the record).
   */
  readonly signPayload?: boolean;
  /**
   * How long a request to the store may go without an answer, or without a byte moving on its
   * connection, before it is cancelled and fails `UNAVAILABLE` ("the object store did not answer
   * within N s"). A body streamed by get must deliver its next chunk within it while the reader
   * waits. Default 10 s (`defaultStoreRequestTimeoutMs`).
   */
  readonly requestTimeoutMs?: number;
  /** A client to use instead of building one; the backend then leaves it open on close. */
  readonly client?: S3Client;
}

/**
 * createS3Backend returns a Backend (kind `s3`) that stores key `k` as object `<prefix>/k` in
 * one bucket, through `@aws-sdk/client-s3`.
 *
 * Guarantees, beyond the Backend contract:
 * - keys, list prefixes and the configured prefix are re-checked by the shared key rules
 *   (`object-key.ts`) with `INVALID_ARGUMENT`, so no key escapes the configured prefix on
 *   stores that normalise paths; list returns keys without the configured prefix;
 * - put is create-only: the write carries `If-None-Match: *` (PutObject, or
 *   CompleteMultipartUpload), so an existing object or a concurrent writer that wins the race
 *   makes this put `ALREADY_EXISTS`; a multipart upload is also preceded by a HeadObject so an
 *   upload doomed to be refused never sends its parts;
 * - every body the store receives carries its CRC32 (`x-amz-checksum-crc32`, under the
 *   signature; computed here, with `@node-rs/crc32`'s SIMD code, as the bytes are copied in):
 *   a store that checks it refuses bytes changed on the way, and put fails with
 *   `UNAVAILABLE` leaving nothing behind; unless `signPayload` is set, the body itself is sent
 *   unsigned (`UNSIGNED-PAYLOAD`), so on plain HTTP the CRC32 guards against corruption, not
 *   against a forger on the path (use HTTPS to the store for that, as for reads);
 * - put holds at most one part in memory before deciding: a body up to `partSizeBytes` is one
 *   PutObject, a larger one a multipart upload with at most `queueSize` parts in flight;
 *   chunks are copied as they arrive, so writers may reuse their buffers; part buffers are
 *   reused across uploads (at most `queueSize + 1` kept free), and an object that would need
 *   more than 10,000 parts is refused with `RESOURCE_EXHAUSTED` before the part past the limit;
 * - a failed or aborted body aborts the multipart upload before put rejects, so no object
 *   and no incomplete multipart upload is left behind (unless the store is unreachable at
 *   that moment);
 * - get is one ranged GetObject streamed as it arrives; a range at or past the end is empty;
 *   the stream holds a connection until it is read to the end or closed with `break`/`return`;
 * - list pages through ListObjectsV2 (1,000 keys per call) up to the requested limit;
 * - deleteMany sends DeleteObjects in batches of 1,000 and fails on any per-key error other
 *   than a missing key;
 * - sweepLeftovers aborts the incomplete multipart uploads under the prefix that were initiated
 *   at least `olderThanMs` ago (uploads cut off by a crash); it pages through the whole
 *   bucket's ListMultipartUploads and filters by prefix itself, because MinIO answers a
 *   prefix that is not a complete key with nothing; MinIO lists uploads without a whole key
 *   from memory only, so uploads cut off by a restart of MinIO itself are not seen (MinIO
 *   expires them on its own; docs/operations.md);
 * - expireIncompleteUploads adds an `AbortIncompleteMultipartUpload` lifecycle rule for the
 *   prefix unless one is in force (`s3-upload-lifecycle.ts`);
 * - the built client retries up to 3 attempts and times out connects after 3 s, so an
 *   unreachable store fails fast with `UNAVAILABLE` and the backend works again as soon as the
 *   store is back;
 * - no request can hang (`s3-request-timeout.ts`): one that goes `requestTimeoutMs` without an
 *   answer or a byte moving (a frozen store, a black-holed network) is cancelled, its socket
 *   closed, and fails `UNAVAILABLE` "the object store did not answer within N s", even with a
 *   client passed in; a get's body fails the same way when the store stops sending while the
 *   reader waits, and is never cut while it moves or while the reader is slow;
 * - the built client keeps its connections: parts and large bodies go without
 *   `Expect: 100-continue`, so a multipart upload runs over at most `queueSize + 1` kept-alive
 *   connections (a part's connection returns to the pool just after its answer) instead of a
 *   new connection per part;
 * - every signal is passed to the SDK, and every SDK failure goes through `fromS3Error`.
 */
export function createS3Backend(opts: S3BackendOptions): Backend {
  const bucket = opts.bucket;
  if (bucket === "") {
    throw new ConnectError("bucket must not be empty", Code.InvalidArgument);
  }
  const rootPrefix = checkRootPrefix(opts.prefix ?? "");
  const partSize = checkPartSize(opts.partSizeBytes);
  const queueSize = opts.queueSize ?? defaultQueueSize;
  if (!Number.isSafeInteger(queueSize) || queueSize < 1) {
    throw new ConnectError(
      `queueSize must be a positive integer, got ${queueSize}`,
      Code.InvalidArgument,
    );
  }
  const signPayload = opts.signPayload ?? false;
  const timeoutMs = checkStoreRequestTimeout(opts.requestTimeoutMs);
  const ownsClient = opts.client === undefined;
  const client = opts.client ?? new S3Client(clientConfig(opts));
  // Every request to the store is bounded: one that stalls fails UNAVAILABLE, cancelled.
  const send = <I extends ServiceInputTypes, O extends ServiceOutputTypes>(
    command: S3Command<I, O>,
    signal: AbortSignal | undefined,
  ): Promise<O> =>
    boundStoreRequest(timeoutMs, signal, (abortSignal) => client.send(command, { abortSignal }));
  // Part buffers are reused across uploads: a fresh 8 MiB per part made V8 collect every few
  // parts (external memory), and lib-storage's concatenation of chunks cost a second copy.
  const parts = createChunkPool(partSize, queueSize + 1);

  const objectKey = (key: string): string => `${rootPrefix}${checkKey(key)}`;
  const fail = (err: unknown, key?: string): ConnectError => fromS3Error(err, key, bucket);

  async function headObject(key: string, signal: AbortSignal | undefined) {
    try {
      const out = await send(
        new HeadObjectCommand({ Bucket: bucket, Key: objectKey(key) }),
        signal,
      );
      return { size: out.ContentLength ?? 0, modifiedMs: out.LastModified?.getTime() ?? 0 };
    } catch (err) {
      const mapped = fail(err, key);
      if (mapped.code === Code.NotFound) return undefined;
      throw mapped;
    }
  }

  async function putSmall(key: string, bytes: Buffer, signal: AbortSignal | undefined) {
    const command = new PutObjectCommand({
      Bucket: bucket,
      Key: objectKey(key),
      Body: bytes,
      ContentLength: bytes.byteLength,
      ChecksumAlgorithm: "CRC32",
      ChecksumCRC32: crc32Base64(crc32(bytes)),
      IfNoneMatch: "*",
    });
    if (!signPayload) command.middlewareStack.add(unsignedPayload(), unsignedPayloadStep);
    await send(command, signal);
  }

  async function putMultipart(
    key: string,
    head: readonly Buffer[],
    rest: AsyncIterator<Uint8Array>,
    signal: AbortSignal | undefined,
  ): Promise<number> {
    const target = { Bucket: bucket, Key: objectKey(key) };
    const created = await send(new CreateMultipartUploadCommand(target), signal);
    const uploadId = created.UploadId;
    if (uploadId === undefined) {
      throw new ConnectError(`object store returned no upload id (key "${key}")`, Code.Internal);
    }
    const upload = { ...target, UploadId: uploadId };
    const completed: CompletedPart[] = [];
    const inFlight = new Set<Promise<void>>();
    let failure: { error: unknown } | undefined;
    let partsSent = 0;
    const sendPart = (part: Buffer, length: number, crc: number) => {
      const partNumber = ++partsSent;
      if (partNumber > maxParts) {
        throw new ConnectError(
          `object needs more than ${maxParts} parts of ${partSize} bytes (key "${key}")`,
          Code.ResourceExhausted,
        );
      }
      const command = new UploadPartCommand({
        ...upload,
        PartNumber: partNumber,
        Body: part.subarray(0, length),
        ContentLength: length,
        ChecksumAlgorithm: "CRC32",
        ChecksumCRC32: crc32Base64(crc),
      });
      if (!signPayload) command.middlewareStack.add(unsignedPayload(), unsignedPayloadStep);
      const sent: Promise<void> = send(command, signal)
        .then(
          (out) => {
            completed.push({ PartNumber: partNumber, ETag: out.ETag });
          },
          (error: unknown) => {
            failure ??= { error };
          },
        )
        .finally(() => {
          inFlight.delete(sent);
          parts.give(part);
        });
      inFlight.add(sent);
    };
    const settle = async () => {
      await Promise.all(inFlight);
      if (failure !== undefined) throw failure.error;
    };

    let size = 0;
    let part = parts.take(partSize);
    let filled = 0;
    let crc = 0;
    try {
      const copyIn = async (chunk: Uint8Array) => {
        size += chunk.byteLength;
        for (let at = 0; at < chunk.byteLength; ) {
          const n = Math.min(partSize - filled, chunk.byteLength - at);
          const piece = chunk.subarray(at, at + n);
          part.set(piece, filled);
          // Folded in while the piece is in cache: taken over the filled part, the checksum
          // read 8 MiB back from memory.
          crc = crc32(piece, crc);
          filled += n;
          at += n;
          if (filled < partSize) continue;
          while (inFlight.size >= queueSize) await Promise.race(inFlight);
          if (failure !== undefined) throw failure.error;
          sendPart(part, filled, crc);
          part = parts.take(partSize);
          filled = 0;
          crc = 0;
        }
      };
      for (const chunk of head) await copyIn(chunk);
      for (;;) {
        const next = await rest.next();
        if (next.done === true) break;
        await copyIn(next.value);
      }
      // Refusing the end of the body keeps a cancelled put from reaching the completion.
      throwIfAborted(signal);
      if (filled > 0) sendPart(part, filled, crc);
      else parts.give(part);
      await settle();
      completed.sort((a, b) => (a.PartNumber ?? 0) - (b.PartNumber ?? 0));
      await send(
        new CompleteMultipartUploadCommand({
          ...upload,
          MultipartUpload: { Parts: completed },
          IfNoneMatch: "*",
        }),
        signal,
      );
      return size;
    } catch (err) {
      // Parts still in flight would land after the abort; they are waited for first.
      await Promise.allSettled(inFlight);
      // Bounded by the timeout alone: a cancelled put still removes its parts.
      await send(new AbortMultipartUploadCommand(upload), undefined).catch(() => undefined);
      throw err;
    }
  }

  return {
    kind: "s3",

    async put(key: string, body: AsyncIterable<Uint8Array>, callOpts?: BackendCallOptions) {
      const signal = callOpts?.signal;
      let source: AsyncIterator<Uint8Array> | undefined;
      let finished = false;
      try {
        throwIfAborted(signal);
        source = abortableBody(body, signal)[Symbol.asyncIterator]();
        const head: Buffer[] = [];
        let headBytes = 0;
        while (headBytes <= partSize) {
          const next = await source.next();
          if (next.done === true) {
            finished = true;
            break;
          }
          head.push(Buffer.from(next.value));
          headBytes += next.value.byteLength;
        }
        let size: number;
        if (finished) {
          throwIfAborted(signal);
          await putSmall(key, Buffer.concat(head, headBytes), signal);
          size = headBytes;
        } else {
          // A small put is refused by If-None-Match alone; a multipart upload first checks for
          // an existing object so a doomed upload never sends its parts.
          if ((await headObject(key, signal)) !== undefined) throw alreadyExists(key);
          size = await putMultipart(key, head, source, signal);
          finished = true;
        }
        return { size, modifiedMs: Date.now() };
      } catch (err) {
        throw fail(err, key);
      } finally {
        if (!finished) await source?.return?.().catch(() => undefined);
      }
    },

    async get(key: string, getOpts?: GetOptions) {
      const signal = getOpts?.signal;
      const { offset, length } = checkRange(getOpts);
      try {
        throwIfAborted(signal);
        if (length === 0) {
          if ((await headObject(key, signal)) === undefined) throw notFound(key);
          return emptyBody();
        }
        const range =
          offset === 0 && length === undefined
            ? undefined
            : `bytes=${offset}-${length === undefined ? "" : offset + length - 1}`;
        const out = await send(
          new GetObjectCommand({ Bucket: bucket, Key: objectKey(key), Range: range }),
          signal,
        );
        const stream = out.Body;
        if (!(stream instanceof Readable)) {
          throw new ConnectError(`object store returned no body (key "${key}")`, Code.Internal);
        }
        return responseBody(stream, signal, (err) => fail(err, key), storeIdleBound(timeoutMs));
      } catch (err) {
        const mapped = fail(err, key);
        if (mapped.code === Code.OutOfRange) return emptyBody();
        throw mapped;
      }
    },

    async head(key: string, callOpts?: BackendCallOptions): Promise<ObjectInfo | undefined> {
      throwIfAborted(callOpts?.signal);
      return headObject(key, callOpts?.signal);
    },

    async list(prefix: string, listOpts?: ListOptions): Promise<ListPage> {
      const signal = listOpts?.signal;
      const limit = checkListLimit(listOpts);
      checkListPrefix(prefix);
      const startAfter = listOpts?.startAfter;
      const keys: string[] = [];
      try {
        throwIfAborted(signal);
        let token: string | undefined;
        for (;;) {
          const out = await send(
            new ListObjectsV2Command({
              Bucket: bucket,
              Prefix: `${rootPrefix}${prefix}`,
              MaxKeys: Math.min(s3BatchLimit, limit - keys.length),
              ...(token === undefined
                ? startAfter === undefined
                  ? {}
                  : { StartAfter: `${rootPrefix}${startAfter}` }
                : { ContinuationToken: token }),
            }),
            signal,
          );
          for (const entry of out.Contents ?? []) keys.push(unprefixed(entry, rootPrefix));
          const more = out.IsTruncated === true && out.NextContinuationToken !== undefined;
          if (!more) return { keys, truncated: false };
          if (keys.length >= limit) return { keys, truncated: true };
          token = out.NextContinuationToken;
        }
      } catch (err) {
        throw fail(err, prefix);
      }
    },

    async delete(key: string, callOpts?: BackendCallOptions): Promise<void> {
      const signal = callOpts?.signal;
      try {
        throwIfAborted(signal);
        await send(new DeleteObjectCommand({ Bucket: bucket, Key: objectKey(key) }), signal);
      } catch (err) {
        const mapped = fail(err, key);
        if (mapped.code !== Code.NotFound) throw mapped;
      }
    },

    async deleteMany(keys: readonly string[], callOpts?: BackendCallOptions): Promise<void> {
      const signal = callOpts?.signal;
      const objects = keys.map((key) => ({ Key: objectKey(key) }));
      try {
        for (let at = 0; at < objects.length; at += s3BatchLimit) {
          throwIfAborted(signal);
          const out = await send(
            new DeleteObjectsCommand({
              Bucket: bucket,
              Delete: { Objects: objects.slice(at, at + s3BatchLimit), Quiet: true },
            }),
            signal,
          );
          const failed = (out.Errors ?? []).find((e) => e.Code !== "NoSuchKey");
          if (failed !== undefined) {
            // Per-key errors come back in a 200 response; give them the shape of a thrown one.
            const err = Object.assign(new Error(failed.Message ?? "delete failed"), {
              name: failed.Code ?? "Unknown",
              Code: failed.Code,
            });
            throw fail(err, failed.Key?.slice(rootPrefix.length));
          }
        }
      } catch (err) {
        throw fail(err);
      }
    },

    async sweepLeftovers(olderThanMs: number, callOpts?: BackendCallOptions): Promise<number> {
      const signal = callOpts?.signal;
      const cutoffMs = sweepCutoffMs(olderThanMs);
      let removed = 0;
      try {
        let keyMarker: string | undefined;
        let uploadIdMarker: string | undefined;
        for (;;) {
          throwIfAborted(signal);
          const out = await send(
            new ListMultipartUploadsCommand({
              Bucket: bucket,
              ...(keyMarker === undefined ? {} : { KeyMarker: keyMarker }),
              ...(uploadIdMarker === undefined ? {} : { UploadIdMarker: uploadIdMarker }),
            }),
            signal,
          );
          for (const upload of out.Uploads ?? []) {
            const key = upload.Key;
            const uploadId = upload.UploadId;
            const initiated = upload.Initiated?.getTime();
            if (key === undefined || uploadId === undefined || initiated === undefined) continue;
            if (!key.startsWith(rootPrefix) || initiated > cutoffMs) continue;
            try {
              await send(
                new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId }),
                signal,
              );
              removed++;
            } catch (err) {
              // Completed or aborted by its writer since the listing: nothing is left to remove.
              if (fail(err).code !== Code.NotFound) throw err;
            }
          }
          if (out.IsTruncated !== true) return removed;
          keyMarker = out.NextKeyMarker;
          uploadIdMarker = out.NextUploadIdMarker;
          if (keyMarker === undefined && uploadIdMarker === undefined) return removed;
        }
      } catch (err) {
        throw fail(err);
      }
    },

    expireIncompleteUploads(days: number, callOpts?: BackendCallOptions) {
      return boundStoreRequest(timeoutMs, callOpts?.signal, (abortSignal) =>
        ensureIncompleteUploadExpiry(client, bucket, rootPrefix, days, abortSignal),
      );
    },

    async close(): Promise<void> {
      if (ownsClient) client.destroy();
    },
  };
}

/** crc32Base64 writes a CRC32 as `x-amz-checksum-crc32` carries it: four big-endian bytes, base64. */
function crc32Base64(crc: number): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc >>> 0);
  return bytes.toString("base64");
}

/**
 * unsignedPayload returns a middleware that sets `x-amz-content-sha256: UNSIGNED-PAYLOAD`
 * before signing, so SigV4 signs the headers (the body's CRC32 among them) without hashing the
 * body, and the store skips hashing it again to check.
 */
function unsignedPayload<I extends object, O extends MetadataBearer>(): BuildMiddleware<I, O> {
  return (next) => (args) => {
    const request = args.request;
    if (typeof request === "object" && request !== null && "headers" in request) {
      const headers = request.headers as Record<string, string>;
      headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD";
    }
    return next(args);
  };
}

const unsignedPayloadStep = { step: "build", name: "spillwayUnsignedPayload" } as const;

function clientConfig(opts: S3BackendOptions): S3ClientConfig {
  return {
    region: opts.region ?? "us-east-1",
    ...(opts.endpoint === undefined ? {} : { endpoint: opts.endpoint }),
    ...(opts.forcePathStyle === undefined ? {} : { forcePathStyle: opts.forcePathStyle }),
    ...(opts.credentials === undefined ? {} : { credentials: opts.credentials }),
    maxAttempts: 3,
    // The SDK sends `Expect: 100-continue` with bodies over 2 MB by default, and sends each such
    // request on a fresh, unpooled connection: a TCP handshake, a round trip before the body
    // and the store's connection setup for every part. The header only spares sending a body
    // the store refuses unread (bad credentials, no bucket): for a part, the upload's create
    // call has ruled that out; a single put sends at most one part's bytes before it learns.
    expectContinueHeader: false,
    // No requestTimeout: the SDK's only warns; every request is bounded by boundStoreRequest.
    requestHandler: { connectionTimeout: 3_000 },
  };
}

function unprefixed(entry: _Object, rootPrefix: string): string {
  const key = entry.Key ?? "";
  return key.startsWith(rootPrefix) ? key.slice(rootPrefix.length) : key;
}

/** A command the S3 client sends, typed by its input and output. */
type S3Command<I extends ServiceInputTypes, O extends ServiceOutputTypes> = Parameters<
  typeof S3Client.prototype.send<I, O>
>[0];

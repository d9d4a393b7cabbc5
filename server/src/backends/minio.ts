import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import * as Minio from "minio";
import type {
  Backend,
  BackendCallOptions,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
} from "./backend.js";
import { abortableBody, emptyBody, readAllBytes, responseBody, throwIfAborted } from "./body.js";
import { checkListLimit, checkRange, sweepCutoffMs } from "./call-options.js";
import { fromMinioError } from "./from-minio-error.js";
import { notFound } from "./object-errors.js";
import { checkKey, checkListPrefix, checkRootPrefix } from "./object-key.js";
import { checkPartSize, maxParts, s3BatchLimit } from "./s3-limits.js";
import {
  boundStoreRequest,
  checkStoreRequestTimeout,
  storeIdleBound,
} from "./s3-request-timeout.js";
import { splitParts } from "./split-parts.js";

/** MinioBackendOptions configure createMinioBackend. */
export interface MinioBackendOptions {
  /** Host name or IP of the S3-compatible server. */
  readonly endPoint: string;
  /** TCP port of the server. */
  readonly port: number;
  /** Whether to use HTTPS. Default false. */
  readonly useSSL?: boolean;
  /** Bucket that holds every object; it must already exist. */
  readonly bucket: string;
  /** Key prefix inside the bucket, following the key rules; a `/` is appended when missing. */
  readonly prefix?: string;
  /** Region of the bucket; unset lets the client discover it. */
  readonly region?: string;
  /** Access key; default `MINIO_ACCESS_KEY`, then `AWS_ACCESS_KEY_ID`, then `MINIO_ROOT_USER`. */
  readonly accessKey?: string;
  /**
   * Secret key; default `MINIO_SECRET_KEY`, then `AWS_SECRET_ACCESS_KEY`, then
   * `MINIO_ROOT_PASSWORD`. Credentials are never read from a file.
   */
  readonly secretKey?: string;
  /** Bytes buffered per multipart part (5 MiB to 5 GiB). Default 8 MiB. */
  readonly partSizeBytes?: number;
  /**
   * How long a request to the server may go without an answer, or without a byte moving on its
   * connection, before it is cancelled and fails `UNAVAILABLE` ("the object store did not answer
   * within N s"). A body streamed by get must deliver its next chunk within it while the reader
   * waits. Default 10 s (`defaultStoreRequestTimeoutMs` in `s3-request-timeout.ts`).
   */
  readonly requestTimeoutMs?: number;
  /** A ready client to use instead of one built from the options above (tests, custom agents). */
  readonly client?: Minio.Client;
}

/**
 * createMinioBackend returns a Backend (kind `minio`) over an S3-compatible server reached with
 * the `minio` client, storing key `k` as object `<prefix>k` in `bucket`.
 *
 * Guarantees, beyond the Backend contract:
 * - put is create-only on the server (`If-None-Match: *`), so concurrent puts of one key from
 *   any number of replicas leave exactly one winner; every other put is `ALREADY_EXISTS` and the
 *   stored bytes are untouched;
 * - put holds at most one part (`partSizeBytes`) of the body in memory: a body that fits one
 *   part is sent as one PUT, a larger one as a multipart upload whose completion carries the
 *   condition; a failed, refused or aborted put aborts its multipart upload before it rejects,
 *   so neither an object nor an incomplete upload is left behind;
 * - keys, list prefixes and the configured prefix are checked by the shared key rules
 *   (`object-key.ts`) with `INVALID_ARGUMENT`, so no key can leave the prefix;
 * - the signal is checked before and after every request to the server and while the body is
 *   read, and an abort cancels the request under way (its HTTP request is destroyed: the client
 *   itself takes no signal); an abort after a put's final request has been answered no longer
 *   cancels that put;
 * - no request can hang (`s3-request-timeout.ts`): one that goes `requestTimeoutMs` without an
 *   answer or a byte moving (a frozen server, a black-holed network) is cancelled the same way
 *   and fails `UNAVAILABLE` "the object store did not answer within N s"; a get's body fails
 *   the same way when the server stops sending while the reader waits, and is never cut while
 *   it moves or while the reader is slow;
 * - a stream returned by get is destroyed when its signal aborts, when the caller stops early,
 *   or on `close()`;
 * - sweepLeftovers aborts the incomplete multipart uploads under the prefix that were initiated
 *   at least `olderThanMs` ago (uploads cut off by a crash), each by its own upload id; it
 *   pages through the whole bucket's incomplete uploads and filters by prefix itself, because
 *   MinIO answers a prefix that is not a complete key with nothing; MinIO lists uploads without
 *   a whole key from memory only, so uploads cut off by a restart of MinIO itself are not seen
 *   (MinIO expires them on its own; docs/operations.md); this backend sets no lifecycle rule
 *   (the s3 backend does: `expireIncompleteUploads`);
 * - `ObjectInfo.modifiedMs` from put is the time the write finished on this replica; from head
 *   it is the server's Last-Modified (whole seconds);
 * - every client failure is reported through `fromMinioError`.
 * Construction fails with `INVALID_ARGUMENT` when no credentials are given or found in the
 * environment, when the endpoint or port is malformed, or when `partSizeBytes` is outside
 * S3's limits; a malformed bucket name is `INVALID_ARGUMENT` on the first call.
 */
export function createMinioBackend(opts: MinioBackendOptions): Backend {
  const bucket = opts.bucket;
  const base = checkRootPrefix(opts.prefix ?? "");
  const partSize = checkPartSize(opts.partSizeBytes);
  const client = opts.client ?? buildClient(opts);
  const openStreams = new Set<Readable>();
  const timeoutMs = checkStoreRequestTimeout(opts.requestTimeoutMs);
  // The client takes no signal: boundStoreRequest cancels its requests by destroying them.
  const request = <T>(signal: AbortSignal | undefined, call: () => Promise<T>) =>
    boundStoreRequest(timeoutMs, signal, call);

  function objectName(key: string): string {
    return `${base}${checkKey(key)}`;
  }

  /**
   * Uploads a body too large for one PUT as parts of `partSize` bytes, holding at most one
   * part plus one chunk in memory, then commits them create-only; resolves with the size.
   */
  async function putMultipart(
    name: string,
    buffered: Buffer[],
    rest: AsyncIterator<Uint8Array>,
    signal: AbortSignal | undefined,
  ): Promise<number> {
    const uploadId = await request(signal, () =>
      client.initiateNewMultipartUpload(bucket, name, {}),
    );
    try {
      const etags: { part: number; etag: string }[] = [];
      const sendPart = async (bytes: Buffer): Promise<void> => {
        throwIfAborted(signal);
        if (etags.length >= maxParts) {
          throw new ConnectError(
            `object exceeds ${maxParts} parts of ${partSize} bytes`,
            Code.ResourceExhausted,
          );
        }
        const part = etags.length + 1;
        const sent = await request(signal, () =>
          client.uploadPart(
            {
              bucketName: bucket,
              objectName: name,
              uploadID: uploadId,
              partNumber: part,
              headers: {},
            },
            bytes,
          ),
        );
        etags.push({ part, etag: sent.etag });
        throwIfAborted(signal);
      };
      async function* chunks(): AsyncGenerator<Buffer> {
        yield* buffered;
        for (;;) {
          const next = await rest.next();
          if (next.done === true) return;
          // Copy: the producer may reuse its buffer, and a part may be a view of this chunk.
          yield Buffer.from(next.value);
        }
      }
      let size = 0;
      for await (const part of splitParts(chunks(), partSize)) {
        await sendPart(part);
        size += part.byteLength;
      }
      throwIfAborted(signal);
      await request(signal, () => completeCreateOnly(name, uploadId, etags));
      return size;
    } catch (err) {
      // A refused or failed upload keeps its parts on the server until it is aborted.
      // Bounded by the timeout alone: a cancelled put still removes its parts.
      await request(undefined, () => client.abortMultipartUpload(bucket, name, uploadId)).catch(
        () => undefined,
      );
      throw err;
    }
  }

  /**
   * Completes a multipart upload with `If-None-Match: *`; the client's own
   * completeMultipartUpload sends no condition headers, so the request is made directly.
   */
  async function completeCreateOnly(
    name: string,
    uploadId: string,
    etags: readonly { part: number; etag: string }[],
  ): Promise<void> {
    const parts = etags
      .map(
        (e) => `<Part><PartNumber>${e.part}</PartNumber><ETag>${xmlEscape(e.etag)}</ETag></Part>`,
      )
      .join("");
    const payload = Buffer.from(
      `<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${parts}</CompleteMultipartUpload>`,
    );
    const response = await client.makeRequestAsync(
      {
        method: "POST",
        bucketName: bucket,
        objectName: name,
        query: `uploadId=${queryEscape(uploadId)}`,
        headers: { "Content-Type": "application/xml", "If-None-Match": "*" },
      },
      payload,
      [200],
    );
    // S3 may report a failed completion inside a 200 response, after keeping the socket alive.
    const text = Buffer.from(await readAllBytes(response, 1024 * 1024)).toString("utf8");
    if (text.includes("<Error>")) {
      const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1] ?? "InternalError";
      throw Object.assign(new Error("multipart completion failed"), { code });
    }
  }

  const backend: Backend = {
    kind: "minio",

    async put(key: string, body: AsyncIterable<Uint8Array>, callOpts?: BackendCallOptions) {
      const signal = callOpts?.signal;
      const name = objectName(key);
      try {
        throwIfAborted(signal);
        const source = abortableBody(body, signal)[Symbol.asyncIterator]();
        const buffered: Buffer[] = [];
        let bufferedBytes = 0;
        try {
          for (;;) {
            const next = await source.next();
            if (next.done === true) break;
            // Copy: the producer may reuse its buffer for the next chunk.
            buffered.push(Buffer.from(next.value));
            bufferedBytes += next.value.byteLength;
            // Only a body larger than one part needs multipart; exactly one part is one PUT.
            if (bufferedBytes > partSize) {
              const size = await putMultipart(name, buffered, source, signal);
              return { size, modifiedMs: Date.now() };
            }
          }
        } finally {
          await source.return?.();
        }
        throwIfAborted(signal);
        const bytes = Buffer.concat(buffered, bufferedBytes);
        await request(signal, () =>
          client.putObject(bucket, name, bytes, bufferedBytes, { "If-None-Match": "*" }),
        );
        return { size: bufferedBytes, modifiedMs: Date.now() };
      } catch (err) {
        throw fromMinioError(err, key);
      }
    },

    async get(key: string, getOpts?: GetOptions) {
      const signal = getOpts?.signal;
      const name = objectName(key);
      const { offset, length } = checkRange(getOpts);
      try {
        throwIfAborted(signal);
        if (length === 0) {
          // An empty range cannot be asked of S3; the object must still exist.
          if ((await backend.head(key, getOpts)) === undefined) throw notFound(key);
          return emptyBody();
        }
        const stream = await request(signal, () =>
          client.getPartialObject(bucket, name, offset, length ?? 0),
        );
        if (signal?.aborted === true) {
          stream.destroy();
          throwIfAborted(signal);
        }
        // close() destroys the streams still open; a destroyed stream leaves the set.
        openStreams.add(stream);
        stream.once("close", () => openStreams.delete(stream));
        return responseBody(
          stream,
          signal,
          (err) => fromMinioError(err, key),
          storeIdleBound(timeoutMs),
        );
      } catch (err) {
        // The object exists but the range starts at or past its end.
        if (codeField(err) === "InvalidRange") return emptyBody();
        throw fromMinioError(err, key);
      }
    },

    async head(key: string, callOpts?: BackendCallOptions): Promise<ObjectInfo | undefined> {
      const name = objectName(key);
      try {
        throwIfAborted(callOpts?.signal);
        const stat = await request(callOpts?.signal, () => client.statObject(bucket, name));
        throwIfAborted(callOpts?.signal);
        return { size: stat.size, modifiedMs: stat.lastModified.getTime() };
      } catch (err) {
        const mapped = fromMinioError(err, key);
        if (mapped.code === Code.NotFound) return undefined;
        throw mapped;
      }
    },

    async list(prefix: string, listOpts?: ListOptions): Promise<ListPage> {
      const signal = listOpts?.signal;
      const limit = checkListLimit(listOpts);
      checkListPrefix(prefix);
      const startAfter = listOpts?.startAfter === undefined ? "" : `${base}${listOpts.startAfter}`;
      const keys: string[] = [];
      let token = "";
      try {
        // One key past the limit tells whether more follow.
        while (keys.length <= limit) {
          throwIfAborted(signal);
          const want = Math.min(s3BatchLimit, limit + 1 - keys.length);
          const page = await request(signal, () =>
            client.listObjectsV2Query(bucket, `${base}${prefix}`, token, "", want, startAfter),
          );
          for (const item of page.objects) {
            if (item.name?.startsWith(base)) {
              keys.push(item.name.slice(base.length));
            }
          }
          if (!page.isTruncated || page.nextContinuationToken === "") break;
          token = page.nextContinuationToken;
        }
        throwIfAborted(signal);
      } catch (err) {
        throw fromMinioError(err, prefix);
      }
      return { keys: keys.slice(0, limit), truncated: keys.length > limit };
    },

    async delete(key: string, callOpts?: BackendCallOptions): Promise<void> {
      const name = objectName(key);
      try {
        throwIfAborted(callOpts?.signal);
        await request(callOpts?.signal, () => client.removeObject(bucket, name));
      } catch (err) {
        const mapped = fromMinioError(err, key);
        if (mapped.code !== Code.NotFound) throw mapped;
      }
    },

    async deleteMany(keys: readonly string[], callOpts?: BackendCallOptions): Promise<void> {
      const names = keys.map(objectName);
      for (let i = 0; i < names.length; i += s3BatchLimit) {
        const batch = names.slice(i, i + s3BatchLimit);
        let failures: unknown[];
        try {
          throwIfAborted(callOpts?.signal);
          failures = await request(callOpts?.signal, () => client.removeObjects(bucket, batch));
        } catch (err) {
          throw fromMinioError(err);
        }
        for (const failure of failures) {
          const entry = deletionError(failure);
          if (entry !== undefined && entry.code !== "NoSuchKey") {
            const key = entry.key?.startsWith(base) ? entry.key.slice(base.length) : entry.key;
            throw fromMinioError(entry, key);
          }
        }
      }
    },

    async sweepLeftovers(olderThanMs: number, callOpts?: BackendCallOptions): Promise<number> {
      const signal = callOpts?.signal;
      const cutoffMs = sweepCutoffMs(olderThanMs);
      let removed = 0;
      let keyMarker = "";
      let uploadIdMarker = "";
      try {
        for (;;) {
          throwIfAborted(signal);
          // listIncompleteUploads would also list every upload's parts; one page is enough here.
          const page = await request(signal, () =>
            client.listIncompleteUploadsQuery(bucket, "", keyMarker, uploadIdMarker, ""),
          );
          for (const upload of page.uploads) {
            if (!upload.key.startsWith(base) || upload.initiated.getTime() > cutoffMs) continue;
            throwIfAborted(signal);
            try {
              // removeIncompleteUpload would pick one upload of the key, maybe a fresh one.
              await request(signal, () =>
                client.abortMultipartUpload(bucket, upload.key, upload.uploadId),
              );
              removed++;
            } catch (err) {
              // Completed or aborted by its writer since the listing: nothing is left to remove.
              if (fromMinioError(err).code !== Code.NotFound) throw err;
            }
          }
          if (!page.isTruncated || (page.nextKeyMarker === "" && page.nextUploadIdMarker === "")) {
            return removed;
          }
          keyMarker = page.nextKeyMarker;
          uploadIdMarker = page.nextUploadIdMarker;
        }
      } catch (err) {
        throw fromMinioError(err);
      }
    },

    async close(): Promise<void> {
      for (const stream of openStreams) stream.destroy();
      openStreams.clear();
    },
  };
  return backend;
}

function buildClient(opts: MinioBackendOptions): Minio.Client {
  const env = process.env;
  const accessKey =
    opts.accessKey ?? env.MINIO_ACCESS_KEY ?? env.AWS_ACCESS_KEY_ID ?? env.MINIO_ROOT_USER;
  const secretKey =
    opts.secretKey ?? env.MINIO_SECRET_KEY ?? env.AWS_SECRET_ACCESS_KEY ?? env.MINIO_ROOT_PASSWORD;
  if (!accessKey || !secretKey) {
    throw new ConnectError(
      "the minio backend needs credentials: pass accessKey and secretKey, or set MINIO_ACCESS_KEY and MINIO_SECRET_KEY",
      Code.InvalidArgument,
    );
  }
  try {
    return new Minio.Client({
      endPoint: opts.endPoint,
      port: opts.port,
      useSSL: opts.useSSL ?? false,
      accessKey,
      secretKey,
      ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
      ...(opts.region === undefined ? {} : { region: opts.region }),
    });
  } catch (err) {
    throw fromMinioError(err);
  }
}

/** Percent-encodes a query value the way S3 signs it (RFC 3986 unreserved characters kept). */
function queryEscape(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

function xmlEscape(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function codeField(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("code" in err)) return undefined;
  return typeof err.code === "string" ? err.code : undefined;
}

/** The code and key of one failed entry of a DeleteObjects answer, when it reports a failure. */
function deletionError(entry: unknown): { code: string; key?: string } | undefined {
  if (typeof entry !== "object" || entry === null) return undefined;
  // The client returns the <Error> elements themselves, though its typings wrap them.
  const record = entry as Record<string, unknown>;
  const inner = typeof record.Error === "object" && record.Error !== null ? record.Error : record;
  const fields = inner as Record<string, unknown>;
  if (typeof fields.Code !== "string") return undefined;
  return typeof fields.Key === "string"
    ? { code: fields.Code, key: fields.Key }
    : { code: fields.Code };
}

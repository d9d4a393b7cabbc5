import { createHash, randomBytes } from "node:crypto";
import { readSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "./backend.js";
import { bytesBody, readAllBytes } from "./body.js";

/** What a contract factory hands over: a fresh backend and how to dispose of it. */
export interface BackendUnderTest {
  /** The backend every contract test runs against. */
  readonly backend: Backend;
  /** Releases whatever the factory set up (directories, buckets, servers). */
  readonly cleanup: () => Promise<void>;
}

/**
 * ContractDifferences declares where a store is known to differ from the contract. Each entry
 * must be backed by a test that asserts the store's actual behaviour, so the declaration fails
 * the run when the difference goes away.
 */
export interface ContractDifferences {
  /** False for stores that list in their own (directory) order rather than byte order. */
  readonly listsInByteOrder?: boolean;
  /** False for stores without `putMany` (the object stores, where each name is a copy). */
  readonly putsMany?: boolean;
  /** True for stores whose objects are local files, with `openLocal` (the filesystem). */
  readonly localFiles?: boolean;
}

/**
 * describeBackendContract registers the Backend contract suite with vitest, once per backend.
 *
 * Guarantees: it uses only the Backend interface, gives every test its own random key prefix
 * (so it can share a bucket or directory with other runs), and makes no timing assumptions;
 * a backend that passes it honours every guarantee documented on `Backend`.
 */
export function describeBackendContract(
  name: string,
  factory: () => Promise<BackendUnderTest>,
  differences: ContractDifferences = {},
): void {
  const byteOrder = differences.listsInByteOrder ?? true;
  const putsMany = differences.putsMany ?? true;
  const localFiles = differences.localFiles ?? false;
  describe(`Backend contract: ${name}`, () => {
    let subject: BackendUnderTest | undefined;

    beforeAll(async () => {
      subject = await factory();
    });

    afterAll(async () => {
      await subject?.backend.close();
      await subject?.cleanup();
    });

    function backend(): Backend {
      if (subject === undefined) throw new Error("the backend factory did not run");
      return subject.backend;
    }

    describe("put and get", () => {
      it("round-trips an empty object", async () => {
        const key = `${uniquePrefix()}empty`;
        const info = await backend().put(key, bytesBody(new Uint8Array(0)));
        expect(info.size).toBe(0);
        expect(await getBytes(backend(), key)).toEqual(new Uint8Array(0));
        expect((await backend().head(key))?.size).toBe(0);
      });

      it("round-trips a single byte", async () => {
        const key = `${uniquePrefix()}one`;
        const info = await backend().put(key, bytesBody(Uint8Array.of(0xa5)));
        expect(info.size).toBe(1);
        expect(await getBytes(backend(), key)).toEqual(Uint8Array.of(0xa5));
      });

      it("round-trips 5 MiB of random bytes sent in uneven chunks", async () => {
        const key = `${uniquePrefix()}big`;
        const payload = new Uint8Array(randomBytes(5 * 1024 * 1024));
        const info = await backend().put(key, chunked(payload, [1, 65_536, 7, 300_001, 1_048_576]));
        expect(info.size).toBe(payload.byteLength);
        expect(Number.isFinite(info.modifiedMs)).toBe(true);
        expectSameBytes(await getBytes(backend(), key), payload);
        expect((await backend().head(key))?.size).toBe(payload.byteLength);
      });

      // A Buffer too: its slice() is a view, not the copy it is on a Uint8Array.
      it.each([
        ["Uint8Array", () => new Uint8Array(1024)],
        ["Buffer", () => Buffer.alloc(1024)],
      ] as const)(
        "stores what was sent even when the writer reuses one %s for every chunk",
        async (_, allocate) => {
          const key = `${uniquePrefix()}reused`;
          const buffer = allocate();
          async function* reusing(): AsyncGenerator<Uint8Array> {
            for (let i = 0; i < 4; i++) {
              buffer.fill(i + 1);
              yield buffer;
            }
          }
          await backend().put(key, reusing());
          buffer.fill(0xff);
          const expected = new Uint8Array(4096);
          for (let i = 0; i < 4; i++) expected.fill(i + 1, i * 1024, (i + 1) * 1024);
          expectSameBytes(await getBytes(backend(), key), expected);
        },
      );

      it("keeps the stored object intact when a reader mutates the chunks it got", async () => {
        const key = `${uniquePrefix()}mutated`;
        await backend().put(key, bytesBody(new Uint8Array(300_000).fill(7)));
        for await (const chunk of await backend().get(key)) chunk.fill(0);
        expectSameBytes(await getBytes(backend(), key), new Uint8Array(300_000).fill(7));
      });

      it("round-trips keys with encoded segments", async () => {
        const prefix = uniquePrefix();
        const key = `${prefix}t/ten%2Eant/r/run/b/call.stdout/x`;
        const bytes = new TextEncoder().encode("stdout line\n");
        await backend().put(key, bytesBody(bytes));
        expect(await getBytes(backend(), key)).toEqual(bytes);
        expect((await backend().list(`${prefix}t/ten%2Eant/`)).keys).toEqual([key]);
      });
    });

    describe("create-only", () => {
      it("refuses a second put to the same key and keeps the original bytes", async () => {
        const key = `${uniquePrefix()}once`;
        await backend().put(key, bytesBody(text("original")));
        const second = await codeOf(backend().put(key, bytesBody(text("replacement!"))));
        expect(second).toBe(Code.AlreadyExists);
        expect(await getBytes(backend(), key)).toEqual(text("original"));
        expect((await backend().head(key))?.size).toBe(8);
      });

      it("lets exactly one of several concurrent puts of one key win", async () => {
        const key = `${uniquePrefix()}race`;
        const candidates = [1, 2, 3, 4, 5].map((n) => new Uint8Array(40_000 * n).fill(n));
        const results = await Promise.allSettled(
          candidates.map((bytes) => backend().put(key, chunked(bytes, [16_384]))),
        );
        const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
        expect(winners).toHaveLength(1);
        for (const r of results) {
          if (r.status === "rejected") expect(codeOfError(r.reason)).toBe(Code.AlreadyExists);
        }
        const winner = candidates[winners[0] ?? -1];
        expect(winner).toBeDefined();
        expectSameBytes(await getBytes(backend(), key), winner ?? new Uint8Array(0));
      });
    });

    describe("ranged get", () => {
      const bytes = text("0123456789");

      it("reads from an offset to the end", async () => {
        const key = `${uniquePrefix()}range`;
        await backend().put(key, bytesBody(bytes));
        expect(await getBytes(backend(), key, { offset: 3 })).toEqual(text("3456789"));
      });

      it("reads offset plus length", async () => {
        const key = `${uniquePrefix()}range`;
        await backend().put(key, bytesBody(bytes));
        expect(await getBytes(backend(), key, { offset: 2, length: 4 })).toEqual(text("2345"));
        expect(await getBytes(backend(), key, { length: 1 })).toEqual(text("0"));
      });

      it("returns no bytes for an offset at or past the end", async () => {
        const key = `${uniquePrefix()}range`;
        await backend().put(key, bytesBody(bytes));
        expect(await getBytes(backend(), key, { offset: 10 })).toEqual(new Uint8Array(0));
        expect(await getBytes(backend(), key, { offset: 25, length: 3 })).toEqual(
          new Uint8Array(0),
        );
      });

      it("stops at the end when the length runs past it", async () => {
        const key = `${uniquePrefix()}range`;
        await backend().put(key, bytesBody(bytes));
        expect(await getBytes(backend(), key, { offset: 7, length: 100 })).toEqual(text("789"));
      });

      it("reads a short range deep inside a large object, and one that ends at its end", async () => {
        const key = `${uniquePrefix()}range-deep`;
        const payload = new Uint8Array(randomBytes(1024 * 1024 + 3));
        await backend().put(key, bytesBody(payload));
        const deep = await getBytes(backend(), key, { offset: 777_777, length: 100 });
        expectSameBytes(deep, payload.subarray(777_777, 777_877));
        const tail = await getBytes(backend(), key, { offset: payload.byteLength - 70_000 });
        expectSameBytes(tail, payload.subarray(payload.byteLength - 70_000));
      });

      it("reads a range that spans several chunks of a large object", async () => {
        const key = `${uniquePrefix()}range-big`;
        const payload = new Uint8Array(randomBytes(1024 * 1024));
        await backend().put(key, bytesBody(payload));
        const got = await getBytes(backend(), key, { offset: 100_000, length: 700_001 });
        expectSameBytes(got, payload.subarray(100_000, 800_001));
      });
    });

    describe("missing objects", () => {
      it("get of a missing key is NOT_FOUND", async () => {
        expect(await codeOf(getBytes(backend(), `${uniquePrefix()}absent`))).toBe(Code.NotFound);
      });

      it("head describes a present object and returns undefined for a missing one", async () => {
        const key = `${uniquePrefix()}present`;
        await backend().put(key, bytesBody(text("abc")));
        const info = await backend().head(key);
        expect(info?.size).toBe(3);
        expect(Number.isFinite(info?.modifiedMs)).toBe(true);
        expect(await backend().head(`${uniquePrefix()}absent`)).toBeUndefined();
      });
    });

    describe("list", () => {
      it(`returns only keys under the prefix, ${byteOrder ? "in ascending byte order" : "in the store's own order (a known difference)"}`, async () => {
        const prefix = uniquePrefix();
        const keys = [
          `${prefix}a/b`,
          `${prefix}a/a`,
          `${prefix}a.b`,
          `${prefix}a-c/x`,
          `${prefix}b`,
        ];
        for (const key of keys) await backend().put(key, bytesBody(text(key)));
        await backend().put(`${uniquePrefix()}a/a`, bytesBody(text("elsewhere")));
        const page = await backend().list(prefix);
        expect(byteOrder ? page.keys : [...page.keys].sort(byBytes)).toEqual(
          [...keys].sort(byBytes),
        );
        expect(page.truncated).toBe(false);
        expect((await backend().list(`${prefix}a/`)).keys).toEqual([
          `${prefix}a/a`,
          `${prefix}a/b`,
        ]);
      });

      it("matches a prefix that ends in the middle of a segment", async () => {
        const prefix = uniquePrefix();
        const keys = [
          `${prefix}r/run1/h/x`,
          `${prefix}r/run10/h/y`,
          `${prefix}r/ru`,
          `${prefix}r/other/z`,
        ];
        for (const key of keys) await backend().put(key, bytesBody(text("v")));
        expect((await backend().list(`${prefix}r/ru`)).keys).toEqual(
          [`${prefix}r/ru`, `${prefix}r/run1/h/x`, `${prefix}r/run10/h/y`].sort(byBytes),
        );
        expect((await backend().list(`${prefix}r/run1/`)).keys).toEqual([`${prefix}r/run1/h/x`]);
        expect((await backend().list(`${prefix}r/zz`)).keys).toEqual([]);
        expect((await backend().list(`${uniquePrefix()}nothing/`)).keys).toEqual([]);
      });

      it("pages with limit and startAfter, returning each of 25 keys exactly once", async () => {
        const prefix = uniquePrefix();
        const keys = Array.from({ length: 25 }, (_, i) =>
          i % 2 === 0 ? `${prefix}k${String(i).padStart(2, "0")}` : `${prefix}d${i}/k`,
        ).sort(byBytes);
        for (const key of keys) await backend().put(key, bytesBody(text(key)));
        const seen: string[] = [];
        let startAfter: string | undefined;
        for (let pages = 0; pages < 25; pages++) {
          const page = await backend().list(prefix, { limit: 7, startAfter });
          expect(page.keys.length).toBeLessThanOrEqual(7);
          seen.push(...page.keys);
          if (!page.truncated) break;
          startAfter = page.keys.at(-1);
          expect(startAfter).toBeDefined();
        }
        expect(seen).toEqual(keys);
        const whole = await backend().list(prefix, { limit: 25 });
        expect(whole.keys).toEqual(keys);
        expect(whole.truncated).toBe(false);
        const first = await backend().list(prefix, { limit: 24 });
        expect(first.truncated).toBe(true);
      });

      it("starts strictly after a startAfter that is not itself a key", async () => {
        const prefix = uniquePrefix();
        for (const key of ["a", "c/x", "e"])
          await backend().put(`${prefix}${key}`, bytesBody(text(key)));
        const page = await backend().list(prefix, { startAfter: `${prefix}b` });
        expect(page.keys).toEqual([`${prefix}c/x`, `${prefix}e`]);
        const after = await backend().list(prefix, { startAfter: `${prefix}c/x` });
        expect(after.keys).toEqual([`${prefix}e`]);
      });
    });

    describe("putMany", () => {
      if (!putsMany) {
        it("has no putMany, so callers put each object", () => {
          expect(backend().putMany).toBeUndefined();
        });
        return;
      }
      const putMany = (
        keys: readonly string[],
        body: AsyncIterable<Uint8Array>,
        signal?: AbortSignal,
      ) => {
        const call = backend().putMany;
        if (call === undefined) throw new Error("the backend has no putMany");
        return call(keys, body, signal === undefined ? {} : { signal });
      };

      it("stores one body under every key, in other directories too, each deletable alone", async () => {
        const prefix = uniquePrefix();
        const bytes = randomBytes(200_000);
        const keys = [`${prefix}a/one`, `${prefix}b/c/two`, `${prefix}a/three`];
        const results = await putMany(keys, chunked(bytes, [65_536]));
        expect(results).toHaveLength(3);
        for (const [i, key] of keys.entries()) {
          expect(results[i]).not.toBeInstanceOf(ConnectError);
          expectSameBytes(await getBytes(backend(), key), bytes);
          expect((await backend().head(key))?.size).toBe(bytes.length);
        }
        expect(await getBytes(backend(), `${prefix}b/c/two`, { offset: 199_990 })).toEqual(
          new Uint8Array(bytes.subarray(199_990)),
        );
        expect((await backend().list(prefix)).keys).toEqual([...keys].sort(byBytes));
        await backend().delete(`${prefix}a/one`);
        expectSameBytes(await getBytes(backend(), `${prefix}b/c/two`), bytes);
        await backend().deleteMany(keys);
        expect((await backend().list(prefix)).keys).toEqual([]);
      });

      it("is create-only per key: a taken one is ALREADY_EXISTS and keeps its bytes", async () => {
        const prefix = uniquePrefix();
        await backend().put(`${prefix}taken`, bytesBody(text("earlier")));
        const results = await putMany(
          [`${prefix}free`, `${prefix}taken`, `${prefix}other`],
          bytesBody(text("later")),
        );
        expect(results.map((r) => (r instanceof ConnectError ? r.code : "ok"))).toEqual([
          "ok",
          Code.AlreadyExists,
          "ok",
        ]);
        expect(await getBytes(backend(), `${prefix}taken`)).toEqual(text("earlier"));
        expect(await getBytes(backend(), `${prefix}other`)).toEqual(text("later"));
      });

      it("leaves nothing visible when the body fails, the signal aborts or a key is bad", async () => {
        const prefix = uniquePrefix();
        async function* failing(): AsyncGenerator<Uint8Array> {
          yield text("partial");
          throw new Error("producer failed");
        }
        const keys = [`${prefix}x`, `${prefix}y`];
        expect(await codeOf(putMany(keys, failing()))).toBeDefined();
        expect(await codeOf(putMany(keys, bytesBody(text("x")), AbortSignal.abort()))).toBe(
          Code.Canceled,
        );
        expect(await codeOf(putMany([`${prefix}z`, "../escape"], bytesBody(text("x"))))).toBe(
          Code.InvalidArgument,
        );
        expect((await backend().list(prefix)).keys).toEqual([]);
        expect(await putMany([], bytesBody(text("x")))).toEqual([]);
      });
    });

    describe("openLocal", () => {
      if (!localFiles) {
        it("has no openLocal: its objects are no local files", () => {
          expect(backend().openLocal).toBeUndefined();
        });
        return;
      }
      const openLocal = (key: string) => {
        const call = backend().openLocal;
        if (call === undefined) throw new Error("the backend has no openLocal");
        return call(key);
      };

      it("opens a descriptor that reads the object's bytes until it is closed", async () => {
        const key = `${uniquePrefix()}local`;
        const bytes = randomBytes(300_000);
        await backend().put(key, bytesBody(bytes));
        const local = await openLocal(key);
        expect(local.size).toBe(bytes.length);
        const read = Buffer.alloc(1000);
        expect(readSync(local.fd, read, 0, read.length, 123_456)).toBe(read.length);
        expect(read.equals(bytes.subarray(123_456, 124_456))).toBe(true);
        await local.close();
        expect(() => readSync(local.fd, read, 0, 1, 0)).toThrow();
      });

      it("is NOT_FOUND for a missing key and INVALID_ARGUMENT for a bad one", async () => {
        expect(await codeOf(openLocal(`${uniquePrefix()}absent`))).toBe(Code.NotFound);
        expect(await codeOf(openLocal(`${uniquePrefix()}../x`))).toBe(Code.InvalidArgument);
      });
    });

    describe("delete", () => {
      it("removes an object: get is NOT_FOUND, head undefined, list empty", async () => {
        const prefix = uniquePrefix();
        const key = `${prefix}run/b/call/obj`;
        await backend().put(key, bytesBody(text("bye")));
        await backend().delete(key);
        expect(await codeOf(getBytes(backend(), key))).toBe(Code.NotFound);
        expect(await backend().head(key)).toBeUndefined();
        expect((await backend().list(prefix)).keys).toEqual([]);
      });

      it("is idempotent and keeps siblings", async () => {
        const prefix = uniquePrefix();
        await backend().put(`${prefix}a/1`, bytesBody(text("1")));
        await backend().put(`${prefix}a/2`, bytesBody(text("2")));
        await backend().delete(`${prefix}a/1`);
        await backend().delete(`${prefix}a/1`);
        await backend().delete(`${prefix}never/existed`);
        expect((await backend().list(prefix)).keys).toEqual([`${prefix}a/2`]);
        expect(await getBytes(backend(), `${prefix}a/2`)).toEqual(text("2"));
      });

      it("deletes many keys at once, missing ones included", async () => {
        const prefix = uniquePrefix();
        const keys = Array.from(
          { length: 30 },
          (_, i) => `${prefix}many/${String(i).padStart(2, "0")}`,
        );
        for (const key of keys) await backend().put(key, bytesBody(text(key)));
        await backend().put(`${prefix}keep`, bytesBody(text("keep")));
        await backend().deleteMany([...keys, `${prefix}never/existed`]);
        expect((await backend().list(prefix)).keys).toEqual([`${prefix}keep`]);
        await backend().deleteMany([]);
      });

      it("frees the key for a new put", async () => {
        const key = `${uniquePrefix()}again`;
        await backend().put(key, bytesBody(text("first")));
        await backend().delete(key);
        await backend().put(key, bytesBody(text("second")));
        expect(await getBytes(backend(), key)).toEqual(text("second"));
      });
    });

    describe("key rules", () => {
      const badKeys = ["../x", "a/../../x", "a/./b", ".", "a//b", "a/", "a\\b", "a\0b", "a/.tmp-x"];
      for (const bad of ["", "/abs", ...badKeys]) {
        it(`refuses key ${JSON.stringify(bad)} with INVALID_ARGUMENT on every call`, async () => {
          const prefix = uniquePrefix();
          const key = bad === "" || bad.startsWith("/") ? bad : `${prefix}${bad}`;
          const kept = `${prefix}kept`;
          await backend().put(kept, bytesBody(text("kept")));
          expect(await codeOf(backend().put(key, bytesBody(text("x"))))).toBe(Code.InvalidArgument);
          expect(await codeOf(backend().get(key))).toBe(Code.InvalidArgument);
          expect(await codeOf(backend().head(key))).toBe(Code.InvalidArgument);
          expect(await codeOf(backend().delete(key))).toBe(Code.InvalidArgument);
          expect(await codeOf(backend().deleteMany([kept, key]))).toBe(Code.InvalidArgument);
          expect((await backend().list(prefix)).keys).toEqual([kept]);
        });
      }

      it("refuses list prefixes that break the key rules", async () => {
        const prefix = uniquePrefix();
        for (const bad of ["/", "/abs/", "../", "a/../", "a//", "a\\b/", "a\0", "a/.tmp-"]) {
          const listed = bad.startsWith("/") ? bad : `${prefix}${bad}`;
          expect(await codeOf(backend().list(listed))).toBe(Code.InvalidArgument);
        }
      });

      it("accepts segments that only look unusual", async () => {
        const prefix = uniquePrefix();
        const keys = [`${prefix}.b`, `${prefix}a..b`, `${prefix}~x/..y`].sort(byBytes);
        for (const key of keys) await backend().put(key, bytesBody(text(key)));
        for (const key of keys) expect(await getBytes(backend(), key)).toEqual(text(key));
        expect([...(await backend().list(prefix)).keys].sort(byBytes)).toEqual(keys);
      });
    });

    describe("failed and aborted puts leave nothing visible", () => {
      it("a body that throws mid-stream", async () => {
        const prefix = uniquePrefix();
        const key = `${prefix}broken`;
        async function* failing(): AsyncGenerator<Uint8Array> {
          yield new Uint8Array(100_000).fill(1);
          throw new Error("producer failed");
        }
        const code = await codeOf(backend().put(key, failing()));
        expect(code).toBeDefined();
        expect(await codeOf(getBytes(backend(), key))).toBe(Code.NotFound);
        expect(await backend().head(key)).toBeUndefined();
        expect((await backend().list(prefix)).keys).toEqual([]);
      });

      it("a signal aborted before the put starts", async () => {
        const prefix = uniquePrefix();
        const key = `${prefix}early`;
        const controller = new AbortController();
        controller.abort();
        const code = await codeOf(
          backend().put(key, bytesBody(text("x")), { signal: controller.signal }),
        );
        expect(code).toBe(Code.Canceled);
        expect(await backend().head(key)).toBeUndefined();
        expect((await backend().list(prefix)).keys).toEqual([]);
      });

      it("a signal aborted mid-put while the body keeps producing", async () => {
        const prefix = uniquePrefix();
        const key = `${prefix}aborted`;
        const controller = new AbortController();
        async function* body(): AsyncGenerator<Uint8Array> {
          yield new Uint8Array(64 * 1024).fill(1);
          controller.abort();
          for (let i = 0; i < 8; i++) yield new Uint8Array(64 * 1024).fill(2);
        }
        const code = await codeOf(backend().put(key, body(), { signal: controller.signal }));
        expect(code).toBe(Code.Canceled);
        expect(await codeOf(getBytes(backend(), key))).toBe(Code.NotFound);
        expect((await backend().list(prefix)).keys).toEqual([]);
      });

      it("a signal aborted mid-put while the body is stalled", async () => {
        const prefix = uniquePrefix();
        const key = `${prefix}stalled`;
        const controller = new AbortController();
        let release: () => void = () => undefined;
        const never = new Promise<void>((resolve) => {
          release = resolve;
        });
        async function* body(): AsyncGenerator<Uint8Array> {
          yield new Uint8Array(64 * 1024).fill(1);
          controller.abort();
          await never;
          yield new Uint8Array(1).fill(2);
        }
        try {
          const code = await codeOf(backend().put(key, body(), { signal: controller.signal }));
          expect(code).toBe(Code.Canceled);
        } finally {
          release();
        }
        expect(await codeOf(getBytes(backend(), key))).toBe(Code.NotFound);
        expect((await backend().list(prefix)).keys).toEqual([]);
      });
    });
  });
}

/** A key prefix no other test (or run) uses. */
function uniquePrefix(): string {
  return `contract-${randomBytes(8).toString("hex")}/`;
}

function text(value: string): Uint8Array {
  return new TextEncoder().encode(value);
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Compares byte arrays by length and digest, so a mismatch never renders a huge diff. */
function expectSameBytes(actual: Uint8Array, expected: Uint8Array): void {
  expect(actual.byteLength).toBe(expected.byteLength);
  expect(sha256(actual)).toBe(sha256(expected));
}

function byBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

async function getBytes(
  backend: Backend,
  key: string,
  range?: { offset?: number; length?: number },
): Promise<Uint8Array> {
  return readAllBytes(await backend.get(key, range));
}

/** Yields payload in chunks whose sizes cycle through sizes, each a fresh copy. */
async function* chunked(payload: Uint8Array, sizes: readonly number[]): AsyncGenerator<Uint8Array> {
  let at = 0;
  for (let i = 0; at < payload.byteLength; i++) {
    const size = sizes[i % sizes.length] ?? 1;
    yield payload.slice(at, at + size);
    at += size;
    // Give other tasks a turn, so concurrent puts really interleave.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

async function codeOf(pending: Promise<unknown>): Promise<Code | "ok" | string> {
  try {
    await pending;
    return "ok";
  } catch (err) {
    return codeOfError(err);
  }
}

function codeOfError(err: unknown): Code | string {
  return err instanceof ConnectError ? err.code : `not a ConnectError: ${String(err)}`;
}

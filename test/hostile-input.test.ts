import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, readdir, readFile, realpath, writeFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import type {
  OffloadHeaderSchema,
  OffloadRequestSchema,
  ReadToolOutputRequestSchema,
  SpillwayService,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { ErrorInfoSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleFor } from "../server/src/keys.js";
import { defaultLimits } from "../server/src/limits.js";
import { codeOf, failureOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const A = "hostile-token-a";
const B = "hostile-token-b";
const TA = "ta";
const TB = "tb";
const MAX_CHUNK = 64 * 1024;
const NUM_RUNS = 60;

type Spillway = Client<typeof SpillwayService>;
type OffloadInit = MessageInitShape<typeof OffloadRequestSchema>;
type HeaderInit = MessageInitShape<typeof OffloadHeaderSchema>;
type ReadInit = MessageInitShape<typeof ReadToolOutputRequestSchema>;

const utf8Bytes = (s: string) => Buffer.byteLength(s, "utf8");
const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest("hex");

/** C0 controls, DEL and C1 controls (category Cc): no id, slot or handle may hold one. */
const hasControl = (s: string) => /\p{Cc}/u.test(s);

/** Whether a string passes the proto's segment rules (see BlobKey) and byte bound. */
function validSegment(s: string, maxBytes: number): boolean {
  return (
    s !== "" &&
    s !== "." &&
    s !== ".." &&
    !["/", "\\"].some((c) => s.includes(c)) &&
    !hasControl(s) &&
    utf8Bytes(s) <= maxBytes
  );
}

/** Whether a slot passes the proto pattern and the clean-relative-path rule. */
function validSlot(slot: string): boolean {
  if (utf8Bytes(slot) > 512) return false;
  if (slot === "stdout" || slot === "stderr" || slot === "value") return true;
  if (!slot.startsWith("file:")) return false;
  const path = slot.slice("file:".length);
  if (path === "" || hasControl(path) || path.includes("\\") || path.startsWith("/")) return false;
  return path.split("/").every((p) => p !== "" && p !== "." && p !== "..");
}

// Tricks aimed at path handling, URL decoding and Unicode normalisation.
const trickPieces = [
  "..",
  ".",
  "...",
  "%2e%2e",
  "%2E%2E%2F",
  "..%2f",
  "%00",
  "%5c",
  "/",
  "\\",
  "\u0000",
  "../",
  "..\\",
  "/etc/passwd",
  "C:\\Windows",
  "~",
  "~root",
  "\u2215",
  "\uff0f",
  "\u2024\u2024",
  "\ufe52",
  "\u202e",
  "\ufeff",
  "\u0085",
  "\u2028",
  "e\u0301",
  "\ud83d\udca5",
  "NUL",
  "con",
  " ",
  "\n",
  "t/",
  "h/",
  "b/",
  ".idx",
  "meta",
];

const trickString = fc
  .array(fc.oneof(fc.constantFrom(...trickPieces), fc.string({ unit: "grapheme", maxLength: 8 })), {
    minLength: 1,
    maxLength: 6,
  })
  .map((parts) => parts.join(""));

const longString = fc
  .tuple(
    fc.string({ unit: "grapheme", minLength: 1, maxLength: 4 }),
    fc.integer({ min: 129, max: 10_240 }),
  )
  .map(([unit, n]) => unit.repeat(Math.ceil(n / unit.length)).slice(0, n) + "x".repeat(129));

/** Any string a hostile caller might send as an identifier. */
const hostileString = fc.oneof(
  { weight: 4, arbitrary: trickString },
  { weight: 1, arbitrary: fc.constantFrom("", ".", "..") },
  { weight: 1, arbitrary: longString },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }) },
);

const validRunId = hostileString.filter((s) => validSegment(s, 128));
const invalidRunId = hostileString.filter((s) => !validSegment(s, 128));

/** Fails unless a call failed with one of the allowed codes (undefined: it succeeded). */
function expectCode(actual: Code | undefined, allowed: readonly (Code | undefined)[]): void {
  expect(actual).not.toBe(Code.Internal);
  expect(actual).not.toBe(Code.Unknown);
  expect(allowed).toContain(actual);
}

async function* messages(list: readonly OffloadInit[]): AsyncIterable<OffloadInit> {
  yield* list;
}

function offloadOnce(client: Spillway, header: HeaderInit, payload: Uint8Array | string) {
  const bytes = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  const list: OffloadInit[] = [{ msg: { case: "header", value: header } }];
  for (let at = 0; at < bytes.byteLength; at += MAX_CHUNK) {
    list.push({ msg: { case: "chunk", value: bytes.subarray(at, at + MAX_CHUNK) } });
  }
  return client.offload(messages(list));
}

/** Reads a whole payload back through bytes windows. */
async function readAll(client: Spillway, runId: string, handle: string): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let offset = 0n;
  for (;;) {
    let got = 0;
    let eof = false;
    for await (const frame of client.readToolOutput({
      runId,
      handle,
      window: { case: "bytes", value: { offset } },
      omitRendered: true,
    })) {
      if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
        parts.push(frame.frame.value.body.value);
        got += frame.frame.value.body.value.byteLength;
      }
      if (frame.frame.case === "trailer") eof = frame.frame.value.eof;
    }
    offset += BigInt(got);
    if (eof || got === 0) return Buffer.concat(parts);
  }
}

async function drainRead(client: Spillway, req: ReadInit): Promise<number> {
  let frames = 0;
  for await (const _ of client.readToolOutput(req)) frames++;
  return frames;
}

/** Every path under dir (relative, `/`-separated) with its kind. */
async function walk(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const visit = async (d: string) => {
    for (const entry of await readdir(d, { withFileTypes: true })) {
      const full = join(d, entry.name);
      const rel = relative(dir, full).split(sep).join("/");
      if (entry.isSymbolicLink()) out.set(rel, "symlink");
      else if (entry.isDirectory()) {
        out.set(rel, "dir");
        await visit(full);
      } else out.set(rel, "file");
    }
  };
  await visit(dir);
  return out;
}

describe("hostile input over the wire (filesystem backend)", () => {
  let t: TestServer;
  let a: Spillway;
  let b: Spillway;
  let outside: string;
  let storeRoot: string;
  let topLevel: string[];
  const sentinel = `sentinel ${randomBytes(16).toString("hex")}\n`;
  const canaryBig = randomBytes(200 * 1024);
  const canarySmall = "small canary\nsecond line\n";
  let counter = 0;
  const fresh = (prefix: string) => `${prefix}-${++counter}`;

  beforeAll(async () => {
    t = await startTestServer({
      tokens: { [A]: TA, [B]: TB },
      limits: { maxChunkBytes: MAX_CHUNK },
    });
    a = t.raw(A);
    b = t.raw(B);
    storeRoot = join(t.dataDir, "store");
    outside = join(t.dataDir, "outside");
    await mkdir(outside);
    await writeFile(join(outside, "sentinel.txt"), sentinel);
    const big = await offloadOnce(
      a,
      { key: { tenant: TA, runId: "canary", callId: "big" } },
      canaryBig,
    );
    const small = await offloadOnce(
      a,
      { key: { tenant: TA, runId: "canary", callId: "small" }, slot: "stdout" },
      canarySmall,
    );
    expect(big.attachment?.handle).toBe("res_big");
    expect(small.attachment?.handle).toBe("out_small_stdout");
    await offloadOnce(
      b,
      { key: { tenant: TB, runId: "canary", callId: "theirs" } },
      "tenant b secret\n",
    );
    topLevel = (await readdir(t.dataDir)).sort();
  });

  afterAll(async () => {
    await t?.stop();
  });

  /** The server answers, the canaries are intact, and nothing outside the data root changed. */
  async function expectUnharmed(): Promise<void> {
    const info = await a.getServerInfo({});
    expect(info.backend).toBe("filesystem");
    expect(sha256(await readAll(a, "canary", "res_big"))).toBe(sha256(canaryBig));
    expect((await readAll(a, "canary", "out_small_stdout")).toString("utf8")).toBe(canarySmall);
    expect((await readdir(t.dataDir)).sort()).toEqual(topLevel);
    expect(await readdir(outside)).toEqual(["sentinel.txt"]);
    expect(await readFile(join(outside, "sentinel.txt"), "utf8")).toBe(sentinel);
    const stored = await walk(storeRoot);
    expect([...stored.values()]).not.toContain("symlink");
    const root = await realpath(storeRoot);
    for (const rel of stored.keys()) {
      const full = await realpath(join(storeRoot, rel));
      expect(full.startsWith(root + sep)).toBe(true);
      expect((await lstat(full)).isSymbolicLink()).toBe(false);
    }
  }

  it("refuses invalid key segments with INVALID_ARGUMENT and stores nothing", async () => {
    const field = fc.constantFrom("tenant", "runId", "callId");
    await fc.assert(
      fc.asyncProperty(field, hostileString, async (which, value) => {
        const key = { tenant: TA, runId: fresh("seg"), callId: "c", [which]: value };
        const valid =
          validSegment(key.tenant, 64) &&
          validSegment(key.runId, 128) &&
          validSegment(key.callId, 128);
        const code = await codeOf(offloadOnce(a, { key }, "x\n"));
        if (!valid) expectCode(code, [Code.InvalidArgument]);
        else if (key.tenant !== TA) expectCode(code, [Code.PermissionDenied]);
        else expectCode(code, [undefined]);
      }),
      {
        numRuns: NUM_RUNS * 2,
        examples: [
          ["runId", ".."],
          ["callId", "../../outside/x"],
          ["tenant", "%2e%2e"],
        ],
      },
    );
    await expectUnharmed();
  });

  it("stores and reads back every valid but tricky key, without collisions", async () => {
    await fc.assert(
      fc.asyncProperty(
        validRunId,
        hostileString.filter((s) => validSegment(s, 128)),
        async (runId, callId) => {
          // Content derived from the key: a storage collision would surface as ALREADY_EXISTS or wrong bytes.
          const content = `${JSON.stringify([runId, callId])}\n`.repeat(
            callId.length % 3 === 0 ? 2000 : 1,
          );
          const res = await offloadOnce(a, { key: { tenant: TA, runId, callId } }, content);
          expect(res.attachment?.handle).toBe(`res_${callId}`);
          expect(res.attachment?.key?.callId).toBe(callId);
          const back = await readAll(a, runId, `res_${callId}`);
          expect(back.toString("utf8")).toBe(content);
          expectCode(await codeOf(b.statToolOutput({ runId, handle: `res_${callId}` })), [
            Code.PermissionDenied,
          ]);
        },
      ),
      {
        numRuns: NUM_RUNS,
        examples: [
          ["%2e%2e", "%2e%2e"],
          ["...", ".%2e"],
          ["\u2024\u2024", "\uff0f..\uff0f"],
          ["a", "a.stdout"],
        ],
      },
    );
    await expectUnharmed();
  });

  it("refuses invalid run ids on every run-scoped RPC with INVALID_ARGUMENT", async () => {
    const rpc = fc.constantFrom(
      "read",
      "stat",
      "list",
      "delete",
      "forkParent",
      "forkChild",
      "mergeParent",
      "mergeChild",
      "ttl",
    );
    await fc.assert(
      fc.asyncProperty(rpc, invalidRunId, async (which, runId) => {
        const ttl = { seconds: 60n, nanos: 0 };
        const call: Record<string, () => Promise<unknown>> = {
          read: () => drainRead(a, { runId, handle: "res_big" }),
          stat: () => a.statToolOutput({ runId, handle: "res_big" }),
          list: () => a.listToolOutputs({ runId }),
          delete: () => a.deleteRun({ runId }),
          forkParent: () => a.forkRun({ parentRunId: runId, childRunId: fresh("child") }),
          forkChild: () => a.forkRun({ parentRunId: "canary", childRunId: runId }),
          mergeParent: () => a.mergeRun({ childRunId: "canary", parentRunId: runId }),
          mergeChild: () => a.mergeRun({ childRunId: runId, parentRunId: "canary" }),
          ttl: () => a.setRunTtl({ runId, ttl }),
        };
        expectCode(await codeOf(call[which]?.() ?? Promise.reject(new Error(which))), [
          Code.InvalidArgument,
        ]);
      }),
      {
        numRuns: NUM_RUNS * 2,
        examples: [
          ["delete", ".."],
          ["forkChild", "../canary"],
          ["read", "\u0000"],
        ],
      },
    );
    await expectUnharmed();
  });

  it("accepts exactly the well-formed slots and keeps file paths relative", async () => {
    const slot = fc.oneof(
      fc.constantFrom(
        "stdout",
        "stderr",
        "value",
        "file:",
        "file:/etc/passwd",
        "file:a/../../b",
        "STDOUT",
      ),
      trickString.map((s) => `file:${s}`),
      fc
        .array(fc.constantFrom("a", "..", ".", "", "b.txt", "%2e%2e", "\\", "\u0000", "\u00e9"), {
          maxLength: 5,
        })
        .map((parts) => `file:${parts.join("/")}`),
      hostileString,
    );
    await fc.assert(
      fc.asyncProperty(slot, async (s) => {
        const callId = fresh("slot");
        const code = await codeOf(
          offloadOnce(a, { key: { tenant: TA, runId: "slots", callId }, slot: s }, s),
        );
        if (!validSlot(s)) {
          expectCode(code, [Code.InvalidArgument]);
          return;
        }
        expectCode(code, [undefined]);
        expect((await readAll(a, "slots", handleFor(callId, s))).toString("utf8")).toBe(s);
      }),
      {
        numRuns: NUM_RUNS * 2,
        examples: [["file:../../outside/sentinel.txt"], ["file:a\\..\\..\\x"], ["file:ok/x.txt"]],
      },
    );
    await expectUnharmed();
  });

  it("refuses negative offsets and limits and bounds huge ones", async () => {
    const int64 = fc.oneof(
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      fc.constantFrom(-(2n ** 63n), -1n, 0n, 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n),
    );
    const int32 = fc.oneof(
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      fc.constantFrom(-(2 ** 31), -1, 0, 1, 2 ** 31 - 1),
    );
    const window = fc.oneof(
      fc.record({
        mode: fc.constant("lines" as const),
        offset: int64,
        limit: fc.option(int32, { nil: undefined }),
        fromEnd: fc.boolean(),
      }),
      fc.record({
        mode: fc.constant("bytes" as const),
        offset: int64,
        limit: fc.option(int64, { nil: undefined }),
      }),
    );
    const handle = fc.constantFrom("res_big", "out_small_stdout");
    await fc.assert(
      fc.asyncProperty(window, handle, async (w, h) => {
        const req: ReadInit =
          w.mode === "lines"
            ? {
                runId: "canary",
                handle: h,
                window: {
                  case: "lines",
                  value: { offset: w.offset, limit: w.limit, fromEnd: w.fromEnd },
                },
              }
            : {
                runId: "canary",
                handle: h,
                window: { case: "bytes", value: { offset: w.offset, limit: w.limit } },
              };
        const position = (n: bigint) => n >= 0n && n <= BigInt(Number.MAX_SAFE_INTEGER);
        const valid =
          position(w.offset) &&
          (w.limit === undefined || (w.limit >= 1 && position(BigInt(w.limit))));
        let returned = 0;
        const code = await codeOf(
          (async () => {
            for await (const f of a.readToolOutput(req)) {
              if (f.frame.case === "content" && f.frame.value.body.case === "data") {
                returned += f.frame.value.body.value.byteLength;
              }
              if (f.frame.case === "content" && f.frame.value.body.case === "lines") {
                returned += f.frame.value.body.value.lines.length;
              }
            }
          })(),
        );
        expectCode(code, valid ? [undefined] : [Code.InvalidArgument]);
        if (valid && w.mode === "bytes") expect(returned).toBeLessThanOrEqual(canaryBig.byteLength);
        if (valid && w.mode === "lines") expect(returned).toBeLessThanOrEqual(1000);
      }),
      {
        numRuns: NUM_RUNS * 3,
        // Regression: an offset past 2^53 rounded up past int64 when echoed back (INTERNAL);
        // then it was clamped to 2^53 - 1 and echoed as a number the client never sent.
        examples: [
          [{ mode: "bytes", offset: 2n ** 63n - 1n, limit: undefined }, "res_big"],
          [{ mode: "bytes", offset: 9_223_372_036_854_775_296n, limit: 2n ** 63n - 1n }, "res_big"],
          [{ mode: "lines", offset: 2n ** 63n - 1n, limit: undefined, fromEnd: false }, "res_big"],
          [{ mode: "lines", offset: 2n ** 63n - 1n, limit: 1, fromEnd: true }, "out_small_stdout"],
        ],
      },
    );
    await expectUnharmed();
  });

  it("runs hostile search patterns in linear time or refuses them precisely", async () => {
    const line = `${"a".repeat(200_000)}!\n${"x".repeat(100_000)}\n${"ab".repeat(50_000)}c\n`;
    await offloadOnce(a, { key: { tenant: TA, runId: "redos", callId: "big-line" } }, line);
    const pattern = fc.oneof(
      fc.constantFrom(
        "(a+)+$",
        "(x*)*y",
        "(a|aa)+$",
        "(a*)*b",
        "((a+)+)+!",
        "(.*a){20}",
        "(a|a?)+$",
        "^(([a-z])+.)+[A-Z]([a-z])+$",
        "(\\w+\\s?)+$",
        "(?:a+){1000}",
        "a{1001}",
        "(a)\\1",
        "(?=a)a",
        "(?<=a)b",
        "[",
        "(",
        "\\",
        "*",
      ),
      fc
        .array(
          fc.constantFrom("(", ")", "a", "x", "+", "*", "?", "|", ".", "{2,}", "$", "^", "\\"),
          {
            minLength: 1,
            maxLength: 40,
          },
        )
        .map((p) => p.join("")),
      fc.string({ unit: "grapheme", minLength: 1025, maxLength: 1500 }),
    );
    const search = fc.record({
      pattern: fc.oneof(pattern, fc.constant("")),
      regex: fc.boolean(),
      ignoreCase: fc.boolean(),
      maxMatches: fc.option(fc.integer({ min: -3, max: 5000 }), { nil: undefined }),
      skip: fc.bigInt({ min: -3n, max: 2n ** 63n - 1n }),
      contextLines: fc.integer({ min: -3, max: 25 }),
    });
    await fc.assert(
      fc.asyncProperty(search, async (s) => {
        const shapeOk =
          s.pattern !== "" &&
          utf8Bytes(s.pattern) <= 1024 &&
          (s.maxMatches === undefined || s.maxMatches >= 1) &&
          s.skip >= 0n &&
          s.skip <= BigInt(Number.MAX_SAFE_INTEGER) &&
          s.contextLines >= 0 &&
          s.contextLines <= 20;
        const code = await codeOf(
          drainRead(a, {
            runId: "redos",
            handle: "res_big-line",
            window: { case: "search", value: s },
          }),
        );
        if (!shapeOk) expectCode(code, [Code.InvalidArgument]);
        else if (s.regex) expectCode(code, [undefined, Code.InvalidArgument]);
        else expectCode(code, [undefined]);
      }),
      {
        numRuns: NUM_RUNS * 2,
        examples: [
          [
            {
              pattern: "(a+)+$",
              regex: true,
              ignoreCase: false,
              maxMatches: undefined,
              skip: 0n,
              contextLines: 0,
            },
          ],
        ],
      },
    );
    await expectUnharmed();
  });

  it("enforces the Offload stream shape and leaves nothing visible on refusal", async () => {
    const msg = fc.oneof(
      { weight: 1, arbitrary: fc.constant({ kind: "header" as const, size: 0 }) },
      {
        weight: 4,
        arbitrary: fc
          .integer({ min: 0, max: 4096 })
          .map((size) => ({ kind: "chunk" as const, size })),
      },
      {
        weight: 1,
        arbitrary: fc
          .integer({ min: MAX_CHUNK + 1, max: 3 * MAX_CHUNK })
          .map((size) => ({ kind: "chunk" as const, size })),
      },
    );
    const stream = fc.oneof(
      fc.array(msg, { maxLength: 6 }),
      fc
        .array(msg, { maxLength: 5 })
        .map((rest) => [{ kind: "header" as const, size: 0 }, ...rest]),
    );
    await fc.assert(
      fc.asyncProperty(stream, async (list) => {
        const callId = fresh("shape");
        const key = { tenant: TA, runId: "shapes", callId };
        const payload: Uint8Array[] = [];
        let expected: Code | undefined;
        if (list[0]?.kind !== "header") expected = Code.InvalidArgument;
        for (const [i, m] of list.entries()) {
          if (expected !== undefined) break;
          if (m.kind === "header" && i > 0) expected = Code.InvalidArgument;
          else if (m.kind === "chunk" && m.size > MAX_CHUNK) expected = Code.ResourceExhausted;
          else if (m.kind === "chunk") payload.push(randomBytes(m.size));
        }
        let chunk = 0;
        const wire: OffloadInit[] = list.map((m) =>
          m.kind === "header"
            ? { msg: { case: "header", value: { key } } }
            : { msg: { case: "chunk", value: payload[chunk++] ?? new Uint8Array(m.size) } },
        );
        const code = await codeOf(a.offload(messages(wire)));
        // A chunk too large for the transport's read limit is refused when the transport frames
        // it, which may come before the handler has looked at the messages ahead of it.
        const transportRefuses = list.some(
          (m) => m.kind === "chunk" && m.size > 2 * MAX_CHUNK - 16,
        );
        expectCode(code, transportRefuses ? [expected, Code.ResourceExhausted] : [expected]);
        const stat = await codeOf(a.statToolOutput({ runId: "shapes", handle: `res_${callId}` }));
        if (expected === undefined) {
          expect(stat).toBeUndefined();
          expect(sha256(await readAll(a, "shapes", `res_${callId}`))).toBe(
            sha256(Buffer.concat(payload)),
          );
        } else {
          expectCode(stat, [Code.PermissionDenied]);
        }
      }),
      {
        numRuns: NUM_RUNS * 2,
        examples: [
          [[]],
          [[{ kind: "header", size: 0 }]],
          [[{ kind: "chunk", size: 3 }]],
          [
            [
              { kind: "header", size: 0 },
              { kind: "header", size: 0 },
            ],
          ],
          [
            [
              { kind: "header", size: 0 },
              { kind: "chunk", size: MAX_CHUNK + 1 },
            ],
          ],
        ],
      },
    );
    await expectUnharmed();
  });

  it("checks every header field and commits only what was declared", async () => {
    const int64 = fc.oneof(
      fc.bigInt({ min: -5n, max: 40n }),
      fc.constantFrom(
        -(2n ** 63n),
        2n ** 63n - 1n,
        BigInt(Number.MAX_SAFE_INTEGER),
        BigInt(Number.MAX_SAFE_INTEGER) + 1n,
      ),
    );
    const header = fc.record({
      expectedSize: fc.option(int64, { nil: undefined }),
      observedBytes: fc.option(int64, { nil: undefined }),
      expectedSha256: fc.option(
        fc.oneof(fc.string({ maxLength: 70 }), fc.constantFrom("good", "GOOD", "bad")),
        {
          nil: undefined,
        },
      ),
      name: fc.oneof(
        fc.string({ unit: "grapheme", maxLength: 20 }),
        fc.string({ minLength: 250, maxLength: 300 }),
      ),
      contentType: fc.oneof(
        fc.constantFrom("application/json", "text/plain", ""),
        fc.string({ minLength: 250, maxLength: 300 }),
      ),
      ttl: fc.option(
        fc.record({
          seconds: fc.constantFrom(
            -(2n ** 40n),
            -1n,
            0n,
            1n,
            31_622_399n,
            31_622_400n,
            31_622_401n,
            2n ** 40n,
          ),
          nanos: fc.constantFrom(0, 1, 999_999_999),
        }),
        { nil: undefined },
      ),
      headChars: fc.option(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { nil: undefined }),
      tailChars: fc.option(fc.constantFrom(-1, 0, 20_000, 20_001), { nil: undefined }),
      payload: fc.string({ unit: "grapheme", maxLength: 30 }),
    });
    await fc.assert(
      fc.asyncProperty(header, async (h) => {
        const size = BigInt(utf8Bytes(h.payload));
        const digest = sha256(h.payload);
        const sha =
          h.expectedSha256 === "good"
            ? digest
            : h.expectedSha256 === "GOOD"
              ? digest.toUpperCase()
              : h.expectedSha256;
        const ttlNanos =
          h.ttl === undefined ? undefined : h.ttl.seconds * 1_000_000_000n + BigInt(h.ttl.nanos);
        const shapeOk =
          (h.expectedSize === undefined ||
            (h.expectedSize >= 0n && h.expectedSize <= BigInt(Number.MAX_SAFE_INTEGER))) &&
          (h.observedBytes === undefined ||
            (h.observedBytes >= 0n && h.observedBytes <= BigInt(Number.MAX_SAFE_INTEGER))) &&
          (sha === undefined || /^[0-9a-f]{64}$/.test(sha)) &&
          utf8Bytes(h.name) <= 256 &&
          utf8Bytes(h.contentType) <= 256 &&
          (ttlNanos === undefined || (ttlNanos > 0n && ttlNanos <= 31_622_400n * 1_000_000_000n)) &&
          [h.headChars, h.tailChars].every((c) => c === undefined || (c >= 0 && c <= 20_000));
        const expected = !shapeOk
          ? Code.InvalidArgument
          : h.expectedSize !== undefined && h.expectedSize > BigInt(defaultLimits.maxBlobBytes)
            ? Code.ResourceExhausted
            : h.expectedSize !== undefined && h.expectedSize !== size
              ? Code.InvalidArgument
              : sha !== undefined && sha !== digest
                ? Code.DataLoss
                : undefined;
        const callId = fresh("hdr");
        const value: HeaderInit = {
          key: { tenant: TA, runId: "headers", callId },
          name: h.name,
          contentType: h.contentType,
          preview: { headChars: h.headChars, tailChars: h.tailChars },
          ...(h.expectedSize === undefined ? {} : { expectedSize: h.expectedSize }),
          ...(h.observedBytes === undefined ? {} : { observedBytes: h.observedBytes }),
          ...(sha === undefined ? {} : { expectedSha256: sha }),
          ...(h.ttl === undefined ? {} : { ttl: h.ttl }),
        };
        let sha256Back: string | undefined;
        const code = await codeOf(
          offloadOnce(a, value, h.payload).then((r) => {
            sha256Back = r.attachment?.sha256;
          }),
        );
        expectCode(code, [expected]);
        if (expected === undefined) expect(sha256Back).toBe(digest);
        else
          expectCode(
            await codeOf(a.statToolOutput({ runId: "headers", handle: `res_${callId}` })),
            [Code.PermissionDenied],
          );
      }),
      { numRuns: NUM_RUNS * 3 },
    );
    await expectUnharmed();
  });

  it("refuses forged and borrowed handles with PERMISSION_DENIED invalid_deferred_handle", async () => {
    await offloadOnce(
      a,
      { key: { tenant: TA, runId: "other", callId: "big" } },
      "other run secret\n",
    );
    await offloadOnce(
      a,
      { key: { tenant: TA, runId: "other", callId: "o" }, slot: "stderr" },
      "other stderr secret\n",
    );
    const own: Record<string, ReadonlySet<string>> = {
      a: new Set(["res_big", "out_small_stdout"]),
      b: new Set(["res_theirs"]),
    };
    const handle = fc.oneof(
      fc.constantFrom(
        "res_theirs",
        "out_o_stderr",
        "out_big_stdout",
        "res_small",
        "out_small_stderr",
        "res_big ",
        "RES_big",
        "res_big\u0000",
        "res_%62ig",
        "../other/h/res_big",
        "t/ta/r/other/h/res_big",
        "res_../../other/big",
        "out_small_file:../../res_big",
      ),
      fc.tuple(fc.constantFrom("res_", "out_"), trickString).map(([p, s]) => p + s),
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 60 }),
      fc.string({ minLength: 2040, maxLength: 2400 }),
    );
    const who = fc.constantFrom("a", "b");
    await fc.assert(
      fc.asyncProperty(handle, who, fc.boolean(), async (h, caller, stat) => {
        fc.pre(own[caller]?.has(h) !== true);
        const client = caller === "a" ? a : b;
        const call = stat
          ? client.statToolOutput({ runId: "canary", handle: h })
          : drainRead(client, { runId: "canary", handle: h });
        let err: ConnectError | undefined;
        try {
          await call;
        } catch (e) {
          err = ConnectError.from(e);
        }
        if (utf8Bytes(h) > 2048 || hasControl(h)) {
          expectCode(err?.code, [Code.InvalidArgument]);
          return;
        }
        expectCode(err?.code, [Code.PermissionDenied]);
        expect(err?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("invalid_deferred_handle");
        expect(err?.rawMessage).not.toContain("secret");
      }),
      {
        numRuns: NUM_RUNS * 3,
        examples: [
          ["res_theirs", "a", false],
          ["res_big", "b", false],
          ["out_small_stdout", "b", true],
        ],
      },
    );
    await expectUnharmed();
  });

  it("never lets a token for one tenant reach another tenant's data", async () => {
    const otherTenant = fc.oneof(
      fc.constantFrom(TB, "TA", "ta ", " ta", "t\u0430", "ta\u200b", "%74a"),
      hostileString.filter((s) => validSegment(s, 64) && s !== TA),
    );
    const action = fc.constantFrom("offload", "fork", "list");
    await fc.assert(
      fc.asyncProperty(otherTenant, action, async (tenant, what) => {
        if (what === "offload") {
          const callId = fresh("cross");
          expectCode(
            await codeOf(offloadOnce(a, { key: { tenant, runId: "canary", callId } }, "forged\n")),
            [Code.PermissionDenied],
          );
          expectCode(await codeOf(b.statToolOutput({ runId: "canary", handle: `res_${callId}` })), [
            Code.PermissionDenied,
          ]);
          return;
        }
        // B forks and lists A's run names inside its own tenant, never A's data.
        if (what === "fork") {
          const child = fresh("b-child");
          expectCode(await codeOf(b.forkRun({ parentRunId: "other", childRunId: child })), [
            undefined,
            Code.NotFound,
          ]);
          expectCode(await codeOf(drainRead(b, { runId: child, handle: "res_big" })), [
            Code.PermissionDenied,
          ]);
          return;
        }
        const list = await b.listToolOutputs({ runId: "canary" });
        expect(list.attachments.map((x) => x.handle)).toEqual(["res_theirs"]);
        expect(list.attachments.every((x) => x.key?.tenant === TB)).toBe(true);
      }),
      {
        numRuns: NUM_RUNS,
        examples: [
          [TB, "offload"],
          ["tb", "fork"],
        ],
      },
    );
    expectCode(await codeOf(t.raw().getServerInfo({})), [Code.Unauthenticated]);
    expectCode(
      await codeOf(t.raw("not-a-token").statToolOutput({ runId: "canary", handle: "res_big" })),
      [Code.Unauthenticated],
    );
    await expectUnharmed();
  });

  it("refuses out-of-range ListRuns page sizes and forged page tokens precisely", async () => {
    // Tenant A holds canary plus forks made by other tests; two runs make a next page.
    await offloadOnce(a, { key: { tenant: TA, runId: fresh("listed"), callId: "c" } }, "x\n");
    const first = await a.listRuns({ pageSize: 1 });
    const token = first.nextPageToken;
    expect(token).not.toBe("");
    const int32 = fc.oneof(
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      fc.constantFrom(-(2 ** 31), -1, 0, 1, 1000, 1001, 2 ** 31 - 1),
    );
    await fc.assert(
      fc.asyncProperty(int32, async (pageSize) => {
        const code = await codeOf(a.listRuns({ pageSize }));
        expectCode(code, pageSize >= 0 && pageSize <= 1000 ? [undefined] : [Code.InvalidArgument]);
      }),
      { numRuns: NUM_RUNS },
    );
    // A real token with one character changed, inserted or removed, tokens of other shapes,
    // and oversized ones: each INVALID_ARGUMENT naming page_token, never echoing it.
    const edited = fc
      .tuple(fc.nat({ max: token.length - 1 }), fc.oneof(trickString, fc.constantFrom("A", "_")))
      .map(([at, piece]) => token.slice(0, at) + piece + token.slice(at + 1))
      .filter((s) => s !== token);
    const forged = fc.oneof(
      edited,
      fc.constant(token.slice(1)),
      fc.constant(`${token}=`),
      fc.constant(` ${token}`),
      fc.base64String({ maxLength: 200 }).filter((s) => s !== ""),
      hostileString.filter((s) => s !== ""),
      fc.constant("A".repeat(2049)),
      fc.constant(token.repeat(Math.ceil(4096 / token.length))),
    );
    await fc.assert(
      fc.asyncProperty(forged, async (pageToken) => {
        const err = await failureOf(a.listRuns({ pageToken }));
        expect(err.code).toBe(Code.InvalidArgument);
        expect(err.rawMessage).toMatch(/^page_token: /);
        if (pageToken.length > 8) expect(err.rawMessage).not.toContain(pageToken);
      }),
      { numRuns: NUM_RUNS * 2, examples: [[`${token.slice(0, 5)}\u0000${token.slice(5)}`]] },
    );
    // The token is A's: B gets INVALID_ARGUMENT and never a page of A's runs.
    expectCode(await codeOf(b.listRuns({ pageToken: token })), [Code.InvalidArgument]);
    // B's own runs are canary and the forks B made earlier; none of A's.
    const theirs = (await b.listRuns({ pageSize: 1000 })).runs.map((r) => r.runId);
    expect(theirs).toContain("canary");
    expect(theirs.filter((r) => r !== "canary" && !r.startsWith("b-child-"))).toEqual([]);
    expect((await a.listRuns({ pageToken: token })).runs.length).toBeGreaterThan(0);
    await expectUnharmed();
  });
});

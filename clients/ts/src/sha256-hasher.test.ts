import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createSha256Hasher, type Sha256Hash } from "./sha256-hasher.js";

const MiB = 1024 * 1024;

/** pattern returns n bytes that differ from one offset to the next, varied by seed. */
function pattern(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed + (i >> 13)) & 0xff;
  return out;
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

async function hashInPieces(
  hash: Sha256Hash,
  bytes: Buffer,
  piece: number,
  pauseMs = 0,
): Promise<string> {
  for (let at = 0; at < bytes.length; at += piece) {
    await hash.update(bytes.subarray(at, at + piece));
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return hash.digest();
}

describe("createSha256Hasher", () => {
  it("matches node:crypto on and off the worker, whatever the pieces", async () => {
    const hasher = createSha256Hasher();
    for (const [size, piece] of [
      [0, 1],
      [1, 1],
      [3 * MiB + 7, 64 * 1024],
      // More than the 8 MiB of slabs a hash may have out, in pieces that straddle slab ends:
      // update must wait for slabs to come back.
      [21 * MiB + 5, 1_000_003],
      [9 * MiB, 16 * MiB],
    ] as const) {
      const bytes = pattern(size, size);
      const hash = hasher.hash(size);
      expect(await hashInPieces(hash, bytes, piece)).toBe(sha256(bytes));
      hash.dispose();
    }
  });

  it("matches node:crypto when pieces come slower than the worker hashes them", async () => {
    // The worker hands each slab back before the next fills, so slabs are reused with part of
    // a piece already in them (pieces of just under 1 MiB).
    const hasher = createSha256Hasher();
    for (const piece of [MiB - 7, 1_000_003, 300_001]) {
      const bytes = pattern(19 * MiB + 3, piece);
      const hash = hasher.hash(bytes.length);
      expect(await hashInPieces(hash, bytes, piece, 2)).toBe(sha256(bytes));
      hash.dispose();
    }
  });

  it("copies each piece before update resolves, so the caller may refill its buffer", async () => {
    const hasher = createSha256Hasher();
    const buffer = Buffer.alloc(700 * 1024);
    const whole = createHash("sha256");
    const hash = hasher.hash(40 * MiB);
    for (let i = 0; i < 60; i++) {
      buffer.fill(i * 7 + 1);
      whole.update(buffer);
      await hash.update(buffer);
    }
    expect(await hash.digest()).toBe(whole.digest("hex"));
  });

  it("keeps hashes that run at once apart, and goes on after one is dropped", async () => {
    const hasher = createSha256Hasher();
    const a = pattern(12 * MiB, 1);
    const b = pattern(10 * MiB, 2);
    const dropped = hasher.hash(20 * MiB);
    await dropped.update(pattern(9 * MiB, 3));
    const [ha, hb] = await Promise.all([
      hashInPieces(hasher.hash(a.length), a, 300_000),
      hashInPieces(hasher.hash(b.length), b, 1 * MiB),
    ]);
    dropped.dispose();
    dropped.dispose();
    expect([ha, hb]).toEqual([sha256(a), sha256(b)]);
    const c = pattern(5 * MiB, 4);
    expect(await hashInPieces(hasher.hash(c.length), c, 2 * MiB)).toBe(sha256(c));
  });

  it("lets the process exit once no hash is open", async () => {
    // The compiled module (test/global-setup/build.ts builds clients/ts/dist/), in a process of
    // its own: its worker must not keep it alive after the digest, nor after a dropped hash.
    const compiled = fileURLToPath(new URL("../dist/sha256-hasher.js", import.meta.url));
    const script = `
      const { createSha256Hasher } = await import(${JSON.stringify(compiled)});
      const hasher = createSha256Hasher();
      const h = hasher.hash(8 << 20);
      await h.update(new Uint8Array(6 << 20).fill(1));
      console.log(await h.digest());
      const dropped = hasher.hash(8 << 20);
      await dropped.update(new Uint8Array(1 << 20));
      dropped.dispose();
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(0);
    expect(out.trim()).toBe(sha256(new Uint8Array(6 * MiB).fill(1)));
  });

  it("closes: open hashes fail CANCELED, new ones are refused, the worker is gone", async () => {
    // A hash left open keeps the worker, and so the process, alive; close ends both.
    const compiled = fileURLToPath(new URL("../dist/sha256-hasher.js", import.meta.url));
    const script = `
      const { createSha256Hasher } = await import(${JSON.stringify(compiled)});
      const hasher = createSha256Hasher();
      const left = hasher.hash(8 << 20);
      await left.update(new Uint8Array(3 << 20).fill(1));
      const small = hasher.hash(10);
      small.update(new Uint8Array(10));
      await Promise.all([hasher.close(), hasher.close()]);
      const refused = (f) => { try { f(); return "hashed"; } catch (e) { return e.code; } };
      console.log(JSON.stringify([
        await left.digest().catch((e) => e.code),
        refused(() => hasher.hash(8 << 20)),
        refused(() => hasher.hash(1)),
        await small.digest(),
      ]));
      left.dispose();
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    const timer = setTimeout(() => child.kill(), 10_000);
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    clearTimeout(timer);
    expect(code).toBe(0);
    const canceled = 1;
    // A hash on the caller's thread needs no worker: one opened before close still digests.
    expect(JSON.parse(out)).toEqual([canceled, canceled, canceled, sha256(new Uint8Array(10))]);
  });
});

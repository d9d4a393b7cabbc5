import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inspectorContentSecurityPolicy } from "../server/src/inspector-assets.js";
import { runCli } from "./support/run-cli.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const dist = fileURLToPath(new URL("../inspector/dist/", import.meta.url));

/** One response: status, headers and body. */
interface Answer {
  readonly status: number;
  readonly headers: http2.IncomingHttpHeaders;
  readonly body: Buffer;
}

/** Sends one request (and `body`) over a fresh h2c connection, with `path` exactly as given. */
async function request(
  url: string,
  path: string,
  method = "GET",
  headers: http2.OutgoingHttpHeaders = {},
  body?: string,
): Promise<Answer> {
  const session = http2.connect(url);
  try {
    return await new Promise<Answer>((resolve, reject) => {
      const stream = session.request({ ":method": method, ":path": path, ...headers });
      const chunks: Buffer[] = [];
      let head: http2.IncomingHttpHeaders = {};
      stream.on("response", (h) => {
        head = h;
      });
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () =>
        resolve({ status: Number(head[":status"]), headers: head, body: Buffer.concat(chunks) }),
      );
      stream.on("error", reject);
      stream.end(body);
    });
  } finally {
    session.close();
  }
}

/**
 * What `spillway serve --inspector` answers on its plaintext (h2c) port: the three files with
 * their types and security headers, and nothing else; without the flag, nothing at all.
 */
describe("spillway serve --inspector", () => {
  let on: SpillwayProcess;
  let off: SpillwayProcess;

  beforeAll(async () => {
    [on, off] = await Promise.all([
      spawnSpillway(["--backend", "memory", "--inspector"]),
      spawnSpillway(["--backend", "memory"]),
    ]);
  });
  afterAll(async () => {
    await Promise.all([on?.stop(), off?.stop()]);
  });

  it.each([
    ["/inspector/", "index.html", "text/html; charset=utf-8"],
    ["/inspector/inspector.js", "inspector.js", "text/javascript; charset=utf-8"],
    ["/inspector/inspector.css", "inspector.css", "text/css; charset=utf-8"],
  ])("serves %s: the built %s as %s, with the security headers", async (path, file, type) => {
    const answer = await request(on.url, path);
    expect(answer.status).toBe(200);
    expect(answer.body.equals(readFileSync(join(dist, file)))).toBe(true);
    expect(answer.headers).toMatchObject({
      "content-type": type,
      "content-length": String(answer.body.length),
      "cache-control": "no-cache",
      "content-security-policy": inspectorContentSecurityPolicy,
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      "referrer-policy": "no-referrer",
    });
    const csp = inspectorContentSecurityPolicy;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    expect(csp).toContain("frame-ancestors 'none'");
    // A query string does not change what is served; HEAD has the headers and no body.
    expect((await request(on.url, `${path}?v=2`)).body.length).toBe(answer.body.length);
    const head = await request(on.url, path, "HEAD");
    expect([head.status, head.headers["content-length"], head.body.length]).toEqual([
      200,
      String(answer.body.length),
      0,
    ]);
    // The entity tag makes a reload a 304 without the body.
    const again = await request(on.url, path, "GET", { "if-none-match": answer.headers.etag });
    expect([again.status, again.body.length]).toEqual([304, 0]);
  });

  it("redirects /inspector to /inspector/", async () => {
    const answer = await request(on.url, "/inspector");
    expect([answer.status, answer.headers.location]).toEqual([308, "inspector/"]);
  });

  it.each([
    "/inspector/index.html",
    "/inspector/../package.json",
    "/inspector/%2e%2e/package.json",
    "/inspector/..%2fpackage.json",
    "/inspector//inspector.js",
    "/inspector/inspector.js/",
    "/inspector/INSPECTOR.JS",
    "/inspector/package.json",
    "/inspector/dist/inspector.js",
  ])("answers 404 for %s: only the listed files are served", async (path) => {
    const answer = await request(on.url, path);
    expect(answer.status).toBe(404);
    expect(answer.headers["x-content-type-options"]).toBe("nosniff");
    expect(answer.body.toString()).toBe("not found\n");
  });

  it("answers 405 to other methods, naming GET and HEAD", async () => {
    for (const method of ["POST", "PUT", "DELETE", "OPTIONS"]) {
      const answer = await request(on.url, "/inspector/", method);
      expect([answer.status, answer.headers.allow], method).toEqual([405, "GET, HEAD"]);
    }
  });

  it("still answers RPCs beside the inspector", async () => {
    const answer = await request(
      on.url,
      "/spillway.v1.SpillwayService/GetServerInfo",
      "POST",
      {
        "content-type": "application/json",
      },
      "{}",
    );
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body.toString())).toMatchObject({ backend: "memory" });
  });

  it("serves none of it without the flag", async () => {
    for (const path of ["/inspector/", "/inspector/inspector.js", "/inspector"]) {
      const answer = await request(off.url, path);
      expect(answer.status, path).toBe(404);
      expect(answer.headers["content-security-policy"], path).toBeUndefined();
    }
  });

  it("is switched on by SPILLWAY_INSPECTOR=1 and refuses a value that is not a switch", async () => {
    const viaEnv = await spawnSpillway(["--backend", "memory"], { SPILLWAY_INSPECTOR: "1" });
    try {
      expect((await request(viaEnv.url, "/inspector/")).status).toBe(200);
    } finally {
      await viaEnv.stop();
    }
    const bad = await runCli(["serve", "--backend", "memory", "--port", "0"], {
      SPILLWAY_INSPECTOR: "yes",
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(
      'spillway: --inspector (SPILLWAY_INSPECTOR): expected 1, true, 0 or false, got "yes"\n',
    );
  });
});

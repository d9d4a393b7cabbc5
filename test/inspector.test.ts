import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import type { Browser, Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "./support/chromium.js";
import { listenLoopback } from "./support/listen-loopback.js";
import { scratchDir } from "./support/scratch-dir.js";
import { writeSelfSigned } from "./support/self-signed.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const root = fileURLToPath(new URL("..", import.meta.url));
/**
 * Where the screenshots go (SPILLWAY_SCREENSHOTS, default dist/screenshots, never committed):
 * docs/images holds the ones docs/inspector.md shows, copied from here.
 */
const screenshots = process.env.SPILLWAY_SCREENSHOTS || join(root, "dist/screenshots");

const token = "inspector-test-token";
const tenant = "acme";
/** Another tenant's token: the page must show nothing of acme's once it is typed. */
const otherToken = "inspector-other-token";
const otherTenant = "globex";
const run = "build-42";
const totalLines = 200_000;
const logLine = (n: number) => `line ${n}: ${n % 5000 === 0 ? "ERROR disk full on /var" : "ok"}`;
const xssPayload =
  '<script>window.__xss = "script"</script>\n<img src=x onerror="window.__xss = \'img\'">\n<b onmouseover="window.__xss = \'b\'">bold?</b>\n';
const json = {
  build: 42,
  ok: false,
  steps: [
    { name: "compile", ms: 5120 },
    { name: "test", ms: 80_311, failed: ["disk"] },
  ],
};

/** The viewer's rows as [number cell, text cell]. */
function rows(page: Page): Promise<[string, string][]> {
  return page.$$eval("#view tbody tr", (trs) =>
    trs.map(
      (tr) => [tr.cells[0]?.textContent ?? "", tr.cells[1]?.textContent ?? ""] as [string, string],
    ),
  );
}

/** Waits until the element's text contains `text`. */
async function waitForText(page: Page, selector: string, text: string): Promise<void> {
  // Page functions are strings: this file compiles without the DOM's types.
  const [s, t] = [JSON.stringify(selector), JSON.stringify(text)];
  await page.waitForFunction(`document.querySelector(${s})?.textContent?.includes(${t}) === true`, {
    timeout: 15_000,
  });
}

/**
 * startPrefixProxy is a reverse proxy on a free loopback port that serves `upstream` under
 * `/spillway/` (the prefix stripped, the upstream's Host sent), as nginx's
 * `location /spillway/ { proxy_pass http://upstream/; }` does. Anything else is 404.
 */
async function startPrefixProxy(upstream: string): Promise<{ url: string; server: Server }> {
  const target = new URL(upstream);
  const server = createServer((req, res) => {
    const url = req.url ?? "";
    if (!url.startsWith("/spillway/")) {
      res.writeHead(404).end();
      return;
    }
    const forward = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: url.slice("/spillway".length),
        headers: { ...req.headers, host: target.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  return { url: await listenLoopback(server), server };
}

/**
 * The browser inspector in a real Chromium (Debian's, through puppeteer-core), against a
 * `spillway serve --inspector` process with a token file, on each port a browser reaches: the
 * plaintext port (HTTP/1.1 beside h2c) and a TLS port (HTTP/2 through ALPN). The plaintext run
 * saves the screenshots.
 */
describe.each([
  { port: "plaintext", tls: false, protocol: "http/1.1" },
  { port: "TLS", tls: true, protocol: "h2" },
])("the browser inspector in Chromium, $port port ($protocol)", ({ tls, protocol }) => {
  const dir = scratchDir("spillway-inspector-");
  let server: SpillwayProcess;
  let sdk: SpillwayClient;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const consoleErrors: string[] = [];
  const dialogs: string[] = [];

  beforeAll(async () => {
    const certFile = join(dir, "cert.pem");
    const keyFile = join(dir, "cert.key");
    writeSelfSigned({
      certFile,
      keyFile,
      commonName: "localhost",
      altNames: ["DNS:localhost", "IP:127.0.0.1"],
    });
    const tokenFile = join(dir, "tokens");
    writeFileSync(
      tokenFile,
      [
        `${createHash("sha256").update(token).digest("hex")} ${tenant}\n`,
        `${createHash("sha256").update(otherToken).digest("hex")} ${otherTenant}\n`,
      ].join(""),
    );
    server = await spawnSpillway([
      "--backend",
      "memory",
      "--token-file",
      tokenFile,
      ...(tls ? ["--tls-cert", certFile, "--tls-key", keyFile] : []),
      "--inspector",
    ]);
    sdk = createSpillwayClient({
      baseUrl: server.url,
      token,
      ...(tls ? { tls: { ca: readFileSync(certFile) } } : {}),
    });
    const key = (runId: string, callId: string) => ({ tenant, runId, callId });
    const log = Array.from({ length: totalLines }, (_, i) => logLine(i + 1)).join("\n");
    await sdk.offload(key(run, "log"), `${log}\n`, {
      name: "make test",
      contentType: "text/plain",
    });
    await sdk.offload(
      key(run, "core"),
      Uint8Array.from({ length: 600 }, (_, i) => i % 256),
      {
        name: "core dump",
        contentType: "application/octet-stream",
      },
    );
    await sdk.offload(
      key(run, "report"),
      { json },
      { name: "report", contentType: "application/json" },
    );
    await sdk.offload(key(run, "xss"), xssPayload, {
      name: '<img src=x onerror="window.__xss=1">',
      contentType: "text/html",
    });
    await sdk.offload(key("deploy-7", "plan"), "plan: 3 to add\n", { name: "terraform plan" });
    browser = await launchChromium({ ignoreCertificateErrors: true });
    page = await browser.newPage();
    page.on("pageerror", (err) => pageErrors.push(String(err)));
    page.on("console", (msg) => {
      // Refused calls and the browser's own /favicon.ico are responses the browser reports, not
      // faults of the page; a blocked script or style (a policy violation) is one.
      if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) {
        consoleErrors.push(msg.text());
      }
    });
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    mkdirSync(screenshots, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  const shot = async (name: string) => {
    if (!tls) await page.screenshot({ path: join(screenshots, `inspector-${name}.png`) });
  };

  it("serves the page with a strict policy, and shows UNAUTHENTICATED for a wrong token", async () => {
    const response = await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    const headers = response?.headers() ?? {};
    expect(response?.status()).toBe(200);
    expect(
      await page.evaluate("performance.getEntriesByType('navigation')[0].nextHopProtocol"),
    ).toBe(protocol);
    expect(headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(headers["content-security-policy"]).toContain("script-src 'self'");
    expect(headers["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(headers["x-content-type-options"]).toBe("nosniff");
    expect(headers["x-frame-options"]).toBe("DENY");
    // Without a token, a server with a token file refuses the listing: the page says so.
    await waitForText(page, "#status.error", "UNAUTHENTICATED");
    await page.type("#token", "not-the-token");
    await page.click("#token-save");
    await waitForText(page, "#status.error", "UNAUTHENTICATED: unknown bearer token");
    expect(await page.$$eval("#runs tbody tr", (trs) => trs.length)).toBe(0);
    // The token is kept for this tab's session, never in the URL.
    expect(await page.evaluate('sessionStorage.getItem("spillway.inspector.token")')).toBe(
      "not-the-token",
    );
    expect(page.url()).toBe(`${server.url}/inspector/`);
    await shot("unauthenticated");
  });

  it("lists the tenant's runs with their output counts", async () => {
    await page.$eval("#token", (input) => {
      (input as unknown as { value: string }).value = "";
    });
    await page.type("#token", token);
    await page.click("#token-save");
    await page.waitForSelector(`#runs tr[data-run="${run}"]`);
    const listed = await page.$$eval("#runs tbody tr", (trs) =>
      trs.map((tr) => [...tr.cells].map((c) => c.textContent)),
    );
    expect(listed.map((r) => r[0]).sort()).toEqual([run, "deploy-7"]);
    expect(listed.find((r) => r[0] === run)?.[1]).toBe("4");
    expect(listed.find((r) => r[0] === "deploy-7")?.[1]).toBe("1");
    expect(await page.$eval("#status", (s) => s.textContent)).toBe("");
    await page.click(`#runs tr[data-run="${run}"]`);
    await page.waitForSelector('#outputs li[data-handle="res_log"]');
  });

  it("lists a run's outputs with previews, the run opened by its id", async () => {
    // The same token, whether or not the listing above got it in.
    await page.evaluate(
      `sessionStorage.setItem("spillway.inspector.token", ${JSON.stringify(token)})`,
    );
    await page.type("#run-id", run);
    await page.click("#run-form button[type=submit]");
    await page.waitForSelector('#outputs li[data-handle="res_log"]');
    const outputs = await page.$$eval("#outputs li", (lis) =>
      lis.map((li) => ({
        handle: li.dataset.handle,
        title: li.querySelector("strong")?.textContent,
        meta: li.querySelector(".meta")?.textContent,
        preview: li.querySelector(".preview")?.textContent,
      })),
    );
    expect(outputs.map((o) => o.handle).sort()).toEqual([
      "res_core",
      "res_log",
      "res_report",
      "res_xss",
    ]);
    const logItem = outputs.find((o) => o.handle === "res_log");
    expect(logItem?.title).toBe("make test");
    expect(logItem?.meta).toContain(`${totalLines} lines`);
    expect(logItem?.preview).toContain("line 1: ok");
    expect(logItem?.preview).toContain(logLine(totalLines));
  });

  it("pages through a 200,000-line output, jumps to a line and shows the tail", async () => {
    await page.click('#outputs li[data-handle="res_log"]');
    await waitForText(page, "#position", `lines 1–100 of ${totalLines}`);
    let shown = await rows(page);
    expect(shown).toHaveLength(100);
    expect(shown[0]).toEqual(["1", logLine(1)]);
    expect(shown[99]).toEqual(["100", logLine(100)]);

    await page.click("#next");
    await waitForText(page, "#position", `lines 101–200 of ${totalLines}`);
    shown = await rows(page);
    expect(shown[0]).toEqual(["101", logLine(101)]);

    await page.type("#jump", "150000");
    await page.click("#jump-form button");
    await waitForText(page, "#position", `lines 150000–150099 of ${totalLines}`);
    shown = await rows(page);
    expect(shown[0]).toEqual(["150000", logLine(150_000)]);
    expect(await page.$eval("#view tr.target td.t", (td) => td.textContent)).toBe(logLine(150_000));
    await shot("lines");

    await page.click("#prev");
    await waitForText(page, "#position", `lines 149900–149999 of ${totalLines}`);

    await page.click("#tail");
    await waitForText(page, "#position", `lines ${totalLines - 99}–${totalLines} of ${totalLines}`);
    shown = await rows(page);
    expect(shown.at(-1)).toEqual([String(totalLines), logLine(totalLines)]);
  });

  it("searches with highlighted matches and context lines", async () => {
    await page.click('#modes button[data-mode="search"]');
    await page.type("#pattern", "error");
    await page.click("#ignore-case");
    await page.$eval("#context", (input) => {
      (input as unknown as { value: string }).value = "2";
    });
    await page.click("#search-form button[type=submit]");
    await waitForText(page, "#position", "40 of 40 matching lines");
    const marks = await page.$$eval("#view mark", (ms) => ms.map((m) => m.textContent));
    expect(marks).toHaveLength(40);
    expect(new Set(marks)).toEqual(new Set(["ERROR"]));
    const shown = await rows(page);
    // The first match with its two lines of context either side.
    expect(shown.slice(0, 5)).toEqual([
      ["4998", logLine(4998)],
      ["4999", logLine(4999)],
      ["5000", logLine(5000)],
      ["5001", logLine(5001)],
      ["5002", logLine(5002)],
    ]);
    expect(
      await page.$eval('#view tr[data-line="5000"]', (tr) => [
        tr.className,
        tr.querySelector("mark")?.textContent,
      ]),
    ).toEqual(["match", "ERROR"]);
    await shot("search");
  });

  it("shows a binary output as hex", async () => {
    await page.click('#outputs li[data-handle="res_core"]');
    await waitForText(page, "#position", "binary; bytes 0–600 of 600");
    const dump = await page.$$eval("#view tbody tr", (trs) =>
      trs.map((tr) => [...tr.cells].map((c) => c.textContent)),
    );
    expect(dump).toHaveLength(Math.ceil(600 / 16));
    expect(dump[0]).toEqual([
      "00000000",
      "00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f",
      "................",
    ]);
    expect(dump[4]).toEqual([
      "00000040",
      "40 41 42 43 44 45 46 47  48 49 4a 4b 4c 4d 4e 4f",
      "@ABCDEFGHIJKLMNO",
    ]);
    await shot("hex");
  });

  it("pretty-prints a JSON output", async () => {
    await page.click('#outputs li[data-handle="res_report"]');
    await waitForText(page, "#position", "JSON, pretty-printed");
    const shown = await rows(page);
    expect(shown.map(([, text]) => text).join("\n")).toBe(JSON.stringify(json, null, 2));
    expect(shown[1]).toEqual(["2", '  "build": 42,']);
    await shot("json");
  });

  it("renders stored markup as text: nothing in an output runs", async () => {
    await page.click('#outputs li[data-handle="res_xss"]');
    await waitForText(page, "#position", "lines 1–3 of 3");
    const shown = await rows(page);
    expect(shown.map(([, text]) => `${text}\n`).join("")).toBe(xssPayload);
    const preview = await page.$eval('#outputs li[data-handle="res_xss"]', (li) => ({
      title: li.querySelector("strong")?.textContent,
      preview: li.querySelector(".preview")?.textContent,
    }));
    expect(preview.title).toBe('<img src=x onerror="window.__xss=1">');
    expect(preview.preview).toContain("<script>");
    await page.hover('#view tr[data-line="3"] td.t');
    const page1 = await page.evaluate(`({
      xss: window.__xss,
      images: document.querySelectorAll("img").length,
      scripts: [...document.scripts].map((s) => s.getAttribute("src")),
      bold: document.querySelectorAll("#view b, #outputs b").length,
    })`);
    expect(page1).toEqual({ xss: undefined, images: 0, scripts: ["inspector.js"], bold: 0 });
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });

  it("shows nothing of the last tenant once another tenant's token is saved", async () => {
    // acme's run, outputs and an open output are on screen from the tests above.
    expect(await page.$$eval("#outputs li", (lis) => lis.length)).toBeGreaterThan(0);
    expect((await rows(page)).length).toBeGreaterThan(0);
    await page.$eval("#token", (input) => {
      (input as unknown as { value: string }).value = "";
    });
    await page.type("#token", otherToken);
    await page.click("#token-save");
    await waitForText(page, "#status", "no runs");
    expect(await page.$$eval("#runs tbody tr", (trs) => trs.length)).toBe(0);
    expect(await page.$$eval("#outputs li", (lis) => lis.length)).toBe(0);
    expect(await page.$eval("#outputs-title", (h) => h.textContent)).toBe("Outputs");
    expect(await rows(page)).toEqual([]);
    expect(await page.$eval("body", (b) => b.textContent)).not.toContain("line 1: ok");
  });
});

/** Dev mode (no token file): the page lists the `dev` tenant's runs with no token typed. */
describe("the browser inspector in Chromium, dev mode", () => {
  let server: SpillwayProcess;
  let browser: Browser;

  beforeAll(async () => {
    server = await spawnSpillway(["--backend", "memory", "--inspector"]);
    const dev = createSpillwayClient({ baseUrl: server.url });
    await dev.offload({ tenant: "dev", runId: "local-1", callId: "ls" }, "a.txt\nb.txt\n");
    await dev.offload({ tenant: "dev", runId: "local-1", callId: "big" }, "{}".padEnd(2 << 20), {
      name: "big json",
      contentType: "application/json",
    });
    await dev.offload({ tenant: "dev", runId: "local-1", callId: "none" }, "", {
      name: "empty json",
      contentType: "application/json",
    });
    for (let i = 0; i < 101; i++) {
      await dev.offload({ tenant: "dev", runId: "wide", callId: `c${i}` }, `${i}\n`);
    }
    // A right-to-left override makes "\u202Egnp.exe" read as "exe.png", and reverses whatever
    // follows it on the same line; an escape sequence is invisible.
    await dev.offload({ tenant: "dev", runId: "\u202Egnp.exe", callId: "x" }, "x\n", {
      name: "\u202Etxt.exe\u001b[31m",
    });
    browser = await launchChromium({});
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("needs no token", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    await page.waitForSelector('#runs tr[data-run="local-1"]');
    expect(await page.evaluate('sessionStorage.getItem("spillway.inspector.token")')).toBeNull();
    await page.click('#runs tr[data-run="local-1"]');
    await page.waitForSelector('#outputs li[data-handle="res_ls"]');
    await page.click('#outputs li[data-handle="res_ls"]');
    await waitForText(page, "#position", "lines 1–2 of 2");
    expect(await rows(page)).toEqual([
      ["1", "a.txt"],
      ["2", "b.txt"],
    ]);
  });

  it("says an empty JSON output is empty, and shows nothing of the output opened before", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    await page.waitForSelector('#runs tr[data-run="local-1"]');
    await page.click('#runs tr[data-run="local-1"]');
    await page.waitForSelector('#outputs li[data-handle="res_none"]');
    await page.click('#outputs li[data-handle="res_big"]');
    await waitForText(page, "#position", "is more than the JSON view parses");
    await page.click('#outputs li[data-handle="res_none"]');
    await waitForText(page, "#position", "empty output");
    expect(await page.$eval("#status", (s) => [s.textContent, s.className])).toEqual([
      "",
      "status",
    ]);
    expect(await rows(page)).toEqual([]);
  });

  it("shows bidi overrides and control characters in names and run ids as visible escapes", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    const row = 'tr[data-run="\u202Egnp.exe"]';
    await page.waitForSelector(`#runs ${row}`);
    expect(await page.$eval(`#runs ${row} td`, (td) => td.textContent)).toBe("<U+202E>gnp.exe");
    await page.click(`#runs ${row}`);
    await page.waitForSelector('#outputs li[data-handle="res_x"]');
    expect(await page.$eval("#outputs-title", (h) => h.textContent)).toBe(
      "Outputs of <U+202E>gnp.exe",
    );
    expect(await page.$eval('#outputs li[data-handle="res_x"] strong', (s) => s.textContent)).toBe(
      "<U+202E>txt.exe<U+001B>[31m",
    );
    await page.click('#outputs li[data-handle="res_x"]');
    await waitForText(page, "#position", "lines 1–1 of 1");
    expect(await page.$eval("#viewer-name", (p) => p.textContent)).toBe(
      "<U+202E>txt.exe<U+001B>[31m · res_x · no type · 2 B",
    );
  });

  it("works behind a reverse proxy that serves it under a path prefix", async () => {
    const proxy = await startPrefixProxy(server.url);
    try {
      const page = await browser.newPage();
      // The address without its slash redirects within the prefix.
      await page.goto(`${proxy.url}/spillway/inspector`, { waitUntil: "load" });
      expect(page.url()).toBe(`${proxy.url}/spillway/inspector/`);
      await page.waitForSelector('#runs tr[data-run="local-1"]');
      await page.click('#runs tr[data-run="local-1"]');
      await page.waitForSelector('#outputs li[data-handle="res_ls"]');
      await page.click('#outputs li[data-handle="res_ls"]');
      await waitForText(page, "#position", "lines 1–2 of 2");
    } finally {
      proxy.server.closeAllConnections();
      await new Promise((resolve) => proxy.server.close(resolve));
    }
  });

  it("lists each run and output once, however fast Reload and More are clicked", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    await page.waitForSelector('#runs tr[data-run="wide"]');
    // Two clicks before the first answer arrives.
    await page.evaluate(
      'document.getElementById("runs-reload").click(); document.getElementById("runs-reload").click()',
    );
    await page.waitForSelector('#runs tr[data-run="wide"]');
    await page.click('#runs tr[data-run="wide"]');
    await page.waitForSelector("#outputs-more:not([hidden])");
    await page.evaluate(
      'document.getElementById("outputs-more").click(); document.getElementById("outputs-more").click()',
    );
    await page.waitForSelector("#outputs-more[hidden]");
    await page.waitForFunction('document.getElementById("status").textContent === ""');
    const runs = await page.$$eval("#runs tbody tr", (trs) => trs.map((tr) => tr.dataset.run));
    expect([...runs].sort()).toEqual(["local-1", "wide", "\u202Egnp.exe"]);
    const handles = await page.$$eval("#outputs li", (lis) => lis.map((li) => li.dataset.handle));
    expect(handles).toHaveLength(101);
    expect(new Set(handles).size).toBe(101);
  });

  // Last: it stops the server.
  it("says the server cannot be reached when it is gone", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    await page.waitForSelector('#runs tr[data-run="local-1"]');
    await server.stop();
    await page.click("#runs-reload");
    await waitForText(page, "#status.error", "cannot reach the server");
  });
});

/**
 * A server whose operator capped bytes windows below the page's 4 KiB (--max-bytes-window
 * 1KiB): every byte is still reachable in Hex, and a JSON output larger than one window says
 * so instead of failing to parse a cut-off document.
 */
describe("the browser inspector in Chromium, bytes windows capped at 1 KiB", () => {
  let server: SpillwayProcess;
  let browser: Browser;

  beforeAll(async () => {
    server = await spawnSpillway([
      "--backend",
      "memory",
      "--inspector",
      "--max-bytes-window",
      "1KiB",
    ]);
    const dev = createSpillwayClient({ baseUrl: server.url });
    await dev.offload(
      { tenant: "dev", runId: "capped", callId: "core" },
      Uint8Array.from({ length: 3000 }, (_, i) => i % 256),
      { contentType: "application/octet-stream" },
    );
    await dev.offload(
      { tenant: "dev", runId: "capped", callId: "report" },
      { json: { items: Array.from({ length: 1000 }, (_, i) => i) } },
      { contentType: "application/json" },
    );
    // 1,900-character lines: the default --max-window-chars (50,000) holds 26 of them, fewer
    // than the page's 100.
    await dev.offload(
      { tenant: "dev", runId: "capped", callId: "wide" },
      Array.from({ length: 300 }, (_, i) => `${i + 1} ${"w".repeat(1900)}\n`).join(""),
    );
    browser = await launchChromium({});
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("pages back through long lines without skipping any", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    await page.waitForSelector('#runs tr[data-run="capped"]');
    await page.click('#runs tr[data-run="capped"]');
    await page.waitForSelector('#outputs li[data-handle="res_wide"]');
    await page.click('#outputs li[data-handle="res_wide"]');
    await waitForText(page, "#position", "lines 1–26 of 300");
    await page.click("#next");
    await waitForText(page, "#position", "lines 27–52 of 300");
    await page.click("#next");
    await waitForText(page, "#position", "lines 53–78 of 300");
    await page.click("#prev");
    await waitForText(page, "#position", "lines 27–52 of 300");
    await page.click("#tail");
    await waitForText(page, "#position", "lines 275–300 of 300");
    await page.click("#prev");
    await waitForText(page, "#position", "lines 249–274 of 300");
    const shown = await rows(page);
    expect([shown[0]?.[0], shown.at(-1)?.[0]]).toEqual(["249", "274"]);
  });

  it("pages through every byte in Hex and says a JSON output is larger than a window", async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/inspector/`, { waitUntil: "load" });
    await page.waitForSelector('#runs tr[data-run="capped"]');
    await page.click('#runs tr[data-run="capped"]');
    await page.waitForSelector('#outputs li[data-handle="res_core"]');
    await page.click('#outputs li[data-handle="res_core"]');
    await waitForText(page, "#position", "bytes 0–1024 of 3000");
    await page.click("#hex-next");
    await waitForText(page, "#position", "bytes 1024–2048 of 3000");
    await page.click("#hex-next");
    await waitForText(page, "#position", "bytes 2048–3000 of 3000");
    expect((await rows(page))[0]?.[0]).toBe("00000800");
    await page.click("#hex-prev");
    await waitForText(page, "#position", "bytes 1024–2048 of 3000");

    await page.click('#outputs li[data-handle="res_report"]');
    await waitForText(page, "#position", "--max-bytes-window");
    expect(await page.$eval("#status", (s) => s.textContent)).toBe("");
    expect(await rows(page)).toEqual([]);
  });
});

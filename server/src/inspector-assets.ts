import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type * as http from "node:http";
import type * as http2 from "node:http2";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** Where the inspector is served: the page at `/inspector/`, its files beside it. */
const inspectorPath = "/inspector/";

/**
 * The policy every inspector response carries: the page runs only its own script and
 * stylesheet (no inline script or style, no eval), talks only to its own origin, cannot be
 * framed, and Trusted Types forbid assigning strings to HTML sinks, so no stored output can
 * become markup even through a future bug.
 */
export const inspectorContentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join("; ");

/** The files of @spillway/inspector's dist/ that are served, and their types: nothing else is. */
const files: Readonly<Record<string, { file: string; type: string }>> = {
  [inspectorPath]: { file: "index.html", type: "text/html; charset=utf-8" },
  [`${inspectorPath}inspector.js`]: {
    file: "inspector.js",
    type: "text/javascript; charset=utf-8",
  },
  [`${inspectorPath}inspector.css`]: { file: "inspector.css", type: "text/css; charset=utf-8" },
};

/** Headers on every inspector response, the errors included. */
const securityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy": inspectorContentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/** One loaded file: its bytes, type and entity tag. */
interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

/** InspectorAssets answers the inspector's requests from files read once, at start. */
export interface InspectorAssets {
  /**
   * Answers `req` when its path is the inspector's (`/inspector` or under `/inspector/`) and
   * returns true; returns false, writing nothing, for every other path. GET and HEAD of a
   * listed file get it (304 when the entity tag matches); `/inspector` redirects to
   * `/inspector/`; any other path under it is 404 and any other method 405. Paths are matched
   * exactly against the file list (no decoding, no file system lookup), so no request can
   * reach another file.
   */
  handle(req: Request, res: Response): boolean;
}

/**
 * inspectorDistDir finds the inspector's built files: the dist/ folder of the
 * @spillway/inspector package installed beside the server. It throws, naming the package,
 * when that is not installed.
 */
function inspectorDistDir(): string {
  try {
    return join(
      dirname(createRequire(import.meta.url).resolve("@spillway/inspector/package.json")),
      "dist",
    );
  } catch {
    throw new Error(
      "--inspector serves the @spillway/inspector package, which is not installed beside the server",
    );
  }
}

/**
 * loadInspectorAssets reads the inspector's files from `dir` (default: inspectorDistDir()).
 * A missing file throws at once, so a server started with the inspector never serves half of
 * it.
 */
export function loadInspectorAssets(dir: string = inspectorDistDir()): InspectorAssets {
  const assets = new Map<string, Asset>();
  for (const [path, { file, type }] of Object.entries(files)) {
    let body: Buffer;
    try {
      body = readFileSync(join(dir, file));
    } catch (err) {
      throw new Error(
        `--inspector: cannot read ${join(dir, file)} (build @spillway/inspector): ${(err as Error).message}`,
      );
    }
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
    assets.set(path, { body, type, etag });
  }

  const finish = (
    res: Response,
    status: number,
    headers: Record<string, string>,
    body?: Buffer | string,
  ) => {
    res.writeHead(status, { ...securityHeaders, ...headers });
    if (body === undefined) res.end();
    else res.end(body);
  };
  const plain = (res: Response, status: number, text: string, extra: Record<string, string> = {}) =>
    finish(
      res,
      status,
      {
        "content-type": "text/plain; charset=utf-8",
        "cache-control": "no-store",
        "content-length": String(Buffer.byteLength(text)),
        ...extra,
      },
      text,
    );

  return {
    handle(req, res) {
      const url = req.url ?? "";
      const query = url.indexOf("?");
      const path = query < 0 ? url : url.slice(0, query);
      if (path !== "/inspector" && !path.startsWith(inspectorPath)) return false;
      if (req.method !== "GET" && req.method !== "HEAD") {
        plain(res, 405, "method not allowed\n", { allow: "GET, HEAD" });
        return true;
      }
      if (path === "/inspector") {
        // Relative, so a reverse proxy's path prefix is kept: /p/inspector -> /p/inspector/.
        plain(res, 308, `${inspectorPath}\n`, { location: "inspector/" });
        return true;
      }
      const asset = assets.get(path);
      if (asset === undefined) {
        plain(res, 404, "not found\n");
        return true;
      }
      const headers = {
        "content-type": asset.type,
        // Revalidated on every load (a cheap 304), so a server upgrade is seen at once.
        "cache-control": "no-cache",
        etag: asset.etag,
      };
      if (req.headers["if-none-match"] === asset.etag) {
        finish(res, 304, headers);
        return true;
      }
      finish(
        res,
        200,
        { ...headers, "content-length": String(asset.body.length) },
        req.method === "HEAD" ? undefined : asset.body,
      );
      return true;
    },
  };
}

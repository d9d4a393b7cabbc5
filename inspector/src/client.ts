import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  type Client,
  Code,
  ConnectError,
  createClient,
  type Interceptor,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import {
  type Line,
  type Match,
  type ReadToolOutputRequestSchema,
  SpillwayService,
  type WindowHeader,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { codeName } from "./format.js";
import { rpcBaseUrl } from "./rpc-base-url.js";

/** Where the page keeps the token: this tab's session only, never a URL or a cookie. */
const tokenKey = "spillway.inspector.token";

/** tokenStore reads and writes the bearer token the user typed, kept in sessionStorage. */
export const tokenStore = {
  get: (): string => sessionStorage.getItem(tokenKey) ?? "",
  set: (token: string): void => {
    if (token === "") sessionStorage.removeItem(tokenKey);
    else sessionStorage.setItem(tokenKey, token);
  },
};

/** Every call carries `authorization: Bearer <token>` when a token is set (none in dev mode). */
const bearer: Interceptor = (next) => (req) => {
  const token = tokenStore.get();
  if (token !== "") req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

/** SpillwayWebClient is the generated SpillwayService client over Connect in the browser. */
export type SpillwayWebClient = Client<typeof SpillwayService>;

/**
 * createSpillwayWebClient talks to the server that served the page (the folder above the
 * page's, so a path prefix added by a reverse proxy is kept), with the Connect protocol in
 * binary over fetch (HTTP/1.1 or HTTP/2, whichever the browser negotiated).
 */
export function createSpillwayWebClient(): SpillwayWebClient {
  return createClient(
    SpillwayService,
    createConnectTransport({
      baseUrl: rpcBaseUrl(location.href),
      useBinaryFormat: true,
      interceptors: [bearer],
    }),
  );
}

/** A whole window: its header, its content by kind, its trailer. */
export interface Window {
  readonly header: WindowHeader | undefined;
  readonly lines: Line[];
  readonly matches: Match[];
  /** Bytes mode's data, concatenated. */
  readonly data: Uint8Array;
  readonly trailer: WindowTrailer | undefined;
}

/**
 * readWindow makes one ReadToolOutput call (the model-facing text left out) and gathers its
 * frames. The caller bounds the window (a lines limit, a bytes limit, max matches), so what is
 * gathered is what one page shows, never the whole output.
 */
export async function readWindow(
  client: SpillwayWebClient,
  request: MessageInitShape<typeof ReadToolOutputRequestSchema>,
): Promise<Window> {
  let header: WindowHeader | undefined;
  let trailer: WindowTrailer | undefined;
  const lines: Line[] = [];
  const matches: Match[] = [];
  const parts: Uint8Array[] = [];
  for await (const frame of client.readToolOutput({ ...request, omitRendered: true })) {
    if (frame.frame.case === "header") header = frame.frame.value;
    else if (frame.frame.case === "trailer") trailer = frame.frame.value;
    else if (frame.frame.case === "content") {
      const body = frame.frame.value.body;
      if (body.case === "lines") lines.push(...body.value.lines);
      else if (body.case === "matches") matches.push(...body.value.matches);
      else if (body.case === "data") parts.push(body.value);
    }
  }
  let size = 0;
  for (const p of parts) size += p.length;
  const data = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    data.set(p, at);
    at += p.length;
  }
  return { header, lines, matches, data, trailer };
}

/**
 * errorText says what went wrong as the gRPC code and the server's message
 * (`UNAUTHENTICATED: missing or unknown bearer token`), for the status line; a call that
 * never reached a server (fetch itself failed: refused, reset, offline) says so instead of
 * the UNKNOWN code Connect-Web gives it.
 */
export function errorText(err: unknown): string {
  const e = ConnectError.from(err);
  if (e.code === Code.Unknown && e.cause instanceof TypeError) {
    return `cannot reach the server (${e.rawMessage}): is it running, and at this address?`;
  }
  return `${codeName(Code[e.code])}: ${e.rawMessage}`;
}

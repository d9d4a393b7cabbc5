import type * as http from "node:http";
import * as http2 from "node:http2";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { clientDeadlineMs } from "./client-deadline.js";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/** How long a request whose call was answered may stay open on the client's side. */
const unendedRequestMs = 5_000;

/**
 * createRequestArrivalBound returns a guard for the requests connect-node reads whole before
 * any interceptor runs: POSTs of the unary methods of `services` (gRPC-Web and Connect unary
 * calls; gRPC ones are bounded by their handlers, streaming ones by createRequestIdleLimit).
 * Such a request gets idleMs from its arrival to arrive and end. Past that, it fails with
 * DEADLINE_EXCEEDED (`the <method> request sent nothing for <idleMs> ms`), which connect answers
 * in the call's own protocol, and a stream the client still keeps open unendedRequestMs after
 * the answer is reset (NO_ERROR, RFC 9113 §8.1): a client that never sends its request holds
 * neither a stream nor its connection for ever. Other requests are left alone.
 */
export function createRequestArrivalBound(
  services: readonly DescService[],
  idleMs: number,
): (req: NodeRequest, res: NodeResponse) => void {
  const unary = new Map<string, string>();
  for (const service of services) {
    for (const method of service.methods) {
      if (method.methodKind === "unary")
        unary.set(`/${service.typeName}/${method.name}`, method.name);
    }
  }
  return (req, res) => {
    const method = req.method === "POST" ? unary.get(req.url ?? "") : undefined;
    if (method === undefined || req.complete) return;
    // The client's own deadline bounds the wait too, when it is the nearer.
    const clientMs = clientDeadlineMs(req.headers);
    const waitMs = clientMs === undefined ? idleMs : Math.min(idleMs, clientMs);
    const timer = setTimeout(() => {
      if (req.complete || req.destroyed) return;
      req.destroy(
        new ConnectError(
          waitMs < idleMs
            ? `the client's deadline of ${waitMs} ms passed before the ${method} request ended`
            : `the ${method} request sent nothing for ${idleMs} ms`,
          Code.DeadlineExceeded,
        ),
      );
      res.once("finish", () => {
        if (!(req instanceof http2.Http2ServerRequest)) return;
        const stream = req.stream;
        const reset = setTimeout(() => {
          if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
        }, unendedRequestMs).unref();
        stream.once("close", () => clearTimeout(reset));
      });
    }, waitMs).unref();
    res.once("close", () => clearTimeout(timer));
  };
}

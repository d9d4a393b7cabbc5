import type * as http from "node:http";
import type * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { resetStalled } from "./request-deadline.js";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/**
 * watchResponseStall bounds how long a response written by connect-node (gRPC-Web, Connect, and
 * gRPC calls connect answers) may wait for a client that reads nothing: when a write has waited
 * idleMs for the response to drain, the response is reset (RST_STREAM CANCEL, or the HTTP/1.1
 * connection closed: no status could pass the unread bytes) and the call fails with
 * DEADLINE_EXCEEDED (`the client read nothing of the <method> response for <idleMs> ms`),
 * releasing what admission gave it. A client that reads, however slowly, restarts the clock with
 * every drain. Responses of gRPC calls served by grpc-node-handler.ts are bounded there.
 */
export function watchResponseStall(req: NodeRequest, res: NodeResponse, idleMs: number): void {
  const path = (req.url ?? "").split("?", 1)[0] ?? "";
  const method = path.slice(path.lastIndexOf("/") + 1);
  let timer: NodeJS.Timeout | undefined;
  const drained = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  const stalled = () => {
    timer = undefined;
    resetStalled(
      res,
      new ConnectError(
        `the client read nothing of the ${method} response for ${idleMs} ms`,
        Code.DeadlineExceeded,
      ),
    );
  };
  const write = res.write;
  // Only a write that returns false (the buffer is full) starts the clock; "drain" stops it.
  res.write = function (this: NodeResponse, ...args: Parameters<typeof write>) {
    const ok = (write as (...a: Parameters<typeof write>) => boolean).apply(this, args);
    if (!ok && timer === undefined) timer = setTimeout(stalled, idleMs);
    return ok;
  } as typeof write;
  res.on("drain", drained);
  res.once("close", drained);
}

// A load balancer's health checker, as its own process: `node health-poller.mjs <host:port>
// <intervalMs>` calls grpc.health.v1.Health/Check for the whole server ("") every intervalMs,
// twice a tick: once over a connection it keeps (reconnecting as a client does) and once over
// a brand-new connection. Each answer is one JSON line on stdout:
// {"conn":"kept"|"new","seen":"SERVING"|"NOT_SERVING"|"refused"|"<CODE>: <details>"}.
// It runs until it is killed or its stdin closes. @grpc/grpc-js is an independent gRPC stack,
// so what it sees is what any gRPC health checker sees.
import * as grpc from "@grpc/grpc-js";

const [target, intervalArg] = process.argv.slice(2);
const intervalMs = Number(intervalArg ?? "50");
const statusNames = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];
const credentials = grpc.credentials.createInsecure();
// The whole server's status is asked for: HealthCheckRequest{service: ""} encodes to nothing.
const serialize = () => Buffer.alloc(0);
// HealthCheckResponse is field 1, a small enum: 0x08 then the value; absent means UNKNOWN.
const deserialize = (bytes) => (bytes.length >= 2 && bytes[0] === 0x08 ? bytes[1] : 0);

const kept = new grpc.Client(target, credentials, {
  "grpc.initial_reconnect_backoff_ms": 20,
  "grpc.max_reconnect_backoff_ms": 100,
});

function check(client, conn) {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      "/grpc.health.v1.Health/Check",
      serialize,
      deserialize,
      {},
      new grpc.Metadata(),
      { deadline: Date.now() + 1_000 },
      (err, status) => {
        let seen;
        if (err === null) seen = statusNames[status] ?? String(status);
        else if (err.code === grpc.status.UNAVAILABLE && /ECONNREFUSED/.test(err.details))
          seen = "refused";
        else seen = `${grpc.status[err.code]}: ${err.details}`;
        process.stdout.write(`${JSON.stringify({ conn, seen })}\n`);
        resolve();
      },
    );
  });
}

async function tick() {
  // A local subchannel pool gives this client a connection of its own, not the kept one's.
  const fresh = new grpc.Client(target, credentials, { "grpc.use_local_subchannel_pool": 1 });
  await Promise.all([check(kept, "kept"), check(fresh, "new")]);
  fresh.close();
  setTimeout(tick, intervalMs);
}

process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
void tick();

import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { writeSelfSigned } from "./support/self-signed.js";

const openssl = (args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });

/** Writes `<dir>/<name>.pem` and `.key`: a self-signed certificate for `cn` (with localhost SANs for "localhost"). */
function selfSigned(dir: string, name: string, cn: string): void {
  writeSelfSigned({
    certFile: join(dir, `${name}.pem`),
    keyFile: join(dir, `${name}.key`),
    commonName: cn,
    ...(cn === "localhost" ? { altNames: ["DNS:localhost", "IP:127.0.0.1"] } : {}),
  });
}

describe("TLS", () => {
  let dir: string;
  let server: SpillwayServer;
  let ca: Buffer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-tls-"));
    selfSigned(dir, "cert", "localhost");
    const cert = join(dir, "cert.pem");
    const key = join(dir, "cert.key");
    ca = await readFile(cert);
    server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      tls: { certFile: cert, keyFile: key },
    });
  });
  afterAll(async () => {
    await server.close(1000);
    await rm(dir, { recursive: true, force: true });
  });

  it("serves gRPC over TLS to a client that trusts the certificate", async () => {
    expect(server.url).toMatch(/^https:/);
    const client = createClient(
      SpillwayService,
      createGrpcTransport({ baseUrl: server.url, nodeOptions: { ca } }),
    );
    const info = await client.getServerInfo({});
    expect(info.backend).toBe("memory");
  });

  it("serves the SDK, told which CA to trust, offloads and reads included", async () => {
    const sdk = createSpillwayClient({ baseUrl: server.url, tls: { ca } });
    const attachment = await sdk.offload(
      { tenant: "dev", runId: "tls", callId: "a" },
      "over tls\n",
    );
    const win = await sdk.readToolOutput({
      runId: "tls",
      handle: attachment.handle,
      window: { case: "lines", value: { offset: 0n } },
    });
    expect(win.rendered).toContain("over tls");
    const untrusting = createSpillwayClient({ baseUrl: server.url });
    const err = await untrusting.serverInfo().catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).rawMessage).toMatch(/certificate/i);
  });

  it("is refused by a client that does not trust the certificate", async () => {
    const client = createClient(SpillwayService, createGrpcTransport({ baseUrl: server.url }));
    const err = await client.getServerInfo({}).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).rawMessage).toMatch(/certificate/i);
  });
});

describe("mTLS", () => {
  let dir: string;
  let server: SpillwayServer;
  let serverCert: Buffer;
  let clientCert: Buffer;
  let clientKey: Buffer;
  let strangerCert: Buffer;
  let strangerKey: Buffer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-mtls-"));
    selfSigned(dir, "server", "localhost");
    selfSigned(dir, "ca", "spillway test CA");
    selfSigned(dir, "stranger", "stranger");
    openssl([
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-subj",
      "/CN=runtime",
      "-keyout",
      join(dir, "client.key"),
      "-out",
      join(dir, "client.csr"),
    ]);
    openssl([
      "x509",
      "-req",
      "-in",
      join(dir, "client.csr"),
      "-CA",
      join(dir, "ca.pem"),
      "-CAkey",
      join(dir, "ca.key"),
      "-CAcreateserial",
      "-days",
      "1",
      "-out",
      join(dir, "client.pem"),
    ]);
    [serverCert, clientCert, clientKey, strangerCert, strangerKey] = (await Promise.all(
      ["server.pem", "client.pem", "client.key", "stranger.pem", "stranger.key"].map((f) =>
        readFile(join(dir, f)),
      ),
    )) as [Buffer, Buffer, Buffer, Buffer, Buffer];
    server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      tls: {
        certFile: join(dir, "server.pem"),
        keyFile: join(dir, "server.key"),
        clientCaFile: join(dir, "ca.pem"),
      },
    });
  });
  afterAll(async () => {
    await server.close(1000);
    await rm(dir, { recursive: true, force: true });
  });

  const clientWith = (cert?: Buffer, key?: Buffer) =>
    createClient(
      SpillwayService,
      createGrpcTransport({
        baseUrl: server.url,
        nodeOptions: { ca: serverCert, ...(cert === undefined ? {} : { cert, key }) },
      }),
    );

  it("serves a client whose certificate the configured CA signed", async () => {
    expect((await clientWith(clientCert, clientKey).getServerInfo({})).backend).toBe("memory");
  });

  it("serves the SDK with a client certificate and refuses it without one", async () => {
    const signed = createSpillwayClient({
      baseUrl: server.url,
      tls: { ca: serverCert, cert: clientCert, key: clientKey },
    });
    expect((await signed.serverInfo()).backend).toBe("memory");
    const anonymous = createSpillwayClient({ baseUrl: server.url, tls: { ca: serverCert } });
    const err = await anonymous.serverInfo().catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).rawMessage).toMatch(/certificate required/);
  });

  it("refuses clients without a certificate or with one the CA did not sign", async () => {
    // Without a certificate the handshake fails outright. With TLS 1.3 a certificate from
    // another CA is refused after the client's side of the handshake, so the stream is reset.
    for (const [client, refusal] of [
      [clientWith(), /certificate required/],
      [clientWith(strangerCert, strangerKey), /unknown ca|bad certificate|error code CANCEL/i],
    ] as const) {
      const err = await client.getServerInfo({}).catch((e: unknown) => ConnectError.from(e));
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).rawMessage).toMatch(refusal);
      // The same server still serves a client with a signed certificate: the refusal is mTLS.
      expect((await clientWith(clientCert, clientKey).getServerInfo({})).backend).toBe("memory");
    }
  });
});

import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type ClientTlsOptions, createSpillwayClient } from "@spillway/client";
import {
  ReadToolOutputRequestSchema,
  ReadToolOutputResponseSchema,
  SpillwayService,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
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

  it("answers gRPC sent over HTTP/1.1 with connect's own handler, bytes-mode reads included", async () => {
    // No gRPC library sends gRPC over HTTP/1.1 (only a hand-made request can, and only where
    // TLS negotiates it), so these calls are not on the direct path (grpc-node-handler.ts):
    // connect encodes each data frame through protobuf-es, and the bytes must not differ.
    const payload = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 131) % 251;
    const sdk = createSpillwayClient({ baseUrl: server.url, tls: { ca } });
    const attachment = await sdk.offload({ tenant: "dev", runId: "h1", callId: "a" }, payload);
    const request = toBinary(
      ReadToolOutputRequestSchema,
      create(ReadToolOutputRequestSchema, {
        runId: "h1",
        handle: attachment.handle,
        window: { case: "bytes", value: { offset: 0n } },
        omitRendered: true,
      }),
    );
    const answer = await new Promise<{ version: string; body: Buffer; status: unknown }>(
      (resolve, reject) => {
        const req = https.request(
          `${server.url}/${SpillwayService.typeName}/ReadToolOutput`,
          { method: "POST", ca, headers: { "content-type": "application/grpc", te: "trailers" } },
          (res) => {
            const parts: Buffer[] = [];
            res.on("data", (part: Buffer) => parts.push(part));
            res.on("end", () =>
              resolve({
                version: res.httpVersion,
                body: Buffer.concat(parts),
                status: res.trailers["grpc-status"],
              }),
            );
            res.on("error", reject);
          },
        );
        req.on("error", reject);
        req.end(Buffer.from(encodeEnvelope(0, request)));
      },
    );
    expect(answer.version).toBe("1.1");
    expect(answer.status).toBe("0");
    const data: Uint8Array[] = [];
    let eof = false;
    for (let at = 0; at < answer.body.length; ) {
      const size = answer.body.readUInt32BE(at + 1);
      const message = fromBinary(
        ReadToolOutputResponseSchema,
        answer.body.subarray(at + 5, at + 5 + size),
      );
      if (message.frame.case === "content" && message.frame.value.body.case === "data") {
        data.push(message.frame.value.body.value);
      }
      if (message.frame.case === "trailer") eof = message.frame.value.eof;
      at += 5 + size;
    }
    expect(eof).toBe(true);
    expect(Buffer.concat(data).equals(payload)).toBe(true);
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

  it("reads bytes over HTTP/1.1 with the SDK's client certificate, and refuses it without", async () => {
    // The SDK speaks gRPC-Web only over HTTP/1.1, and answers say which they are.
    const seen: string[] = [];
    const protocolOf: Interceptor = (next) => async (req) => {
      const res = await next(req);
      seen.push(`${req.method.name} ${res.header.get("content-type")}`);
      return res;
    };
    const sdk = (tls: ClientTlsOptions) =>
      createSpillwayClient({
        baseUrl: server.url,
        tls,
        bulkReads: "http1",
        interceptors: [protocolOf],
        retry: { maxAttempts: 1 },
      });
    const signed = sdk({ ca: serverCert, cert: clientCert, key: clientKey });
    const payload = randomBytes(3 * 1024 * 1024 + 5);
    const { handle } = await signed.offload({ tenant: "dev", runId: "mtls", callId: "a" }, payload);
    const chunks: Uint8Array[] = [];
    for await (const chunk of signed.readBytes("mtls", handle)) chunks.push(Buffer.from(chunk));
    expect(Buffer.concat(chunks).equals(payload)).toBe(true);
    expect(seen).toEqual([
      "Offload application/grpc+proto",
      "ReadToolOutput application/grpc-web+proto",
    ]);
    const anonymous = sdk({ ca: serverCert }).readBytes("mtls", handle);
    const err = await (async () => {
      for await (const _ of anonymous);
    })().catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).rawMessage).toMatch(/certificate required/);
  });
});

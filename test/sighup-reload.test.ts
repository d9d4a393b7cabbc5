import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { writeSelfSigned } from "./support/self-signed.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";
import { waitFor } from "./support/wait-for.js";

/** The common name of the certificate a fresh TLS connection to `url` is served. */
function servedName(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: hostname,
      port: Number(port),
      ALPNProtocols: ["h2"],
      rejectUnauthorized: false,
    });
    socket.once("secureConnect", () => {
      const name = socket.getPeerCertificate().subject.CN;
      socket.destroy();
      resolve(Array.isArray(name) ? name.join(",") : (name ?? ""));
    });
    socket.once("error", reject);
  });
}

/** Sends one Connect-protocol GetServerInfo on an open HTTP/2 session; resolves with its status. */
function getServerInfoOn(session: http2.ClientHttp2Session): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ":method": "POST",
      ":path": `/${SpillwayService.typeName}/GetServerInfo`,
      "content-type": "application/json",
      "connect-protocol-version": "1",
    });
    let status = 0;
    stream.once("response", (headers) => {
      status = Number(headers[":status"]);
    });
    stream.on("data", () => {});
    stream.once("end", () => resolve(status));
    stream.once("error", reject);
    stream.end("{}");
  });
}

/** Sends SIGHUP and waits until the server logs `message` one more time than before. */
async function hangUp(server: SpillwayProcess, message: string): Promise<void> {
  const count = () => server.output().split(message).length - 1;
  const before = count();
  server.kill("SIGHUP");
  await waitFor(async () => count() > before, 5_000);
}

describe("SIGHUP reloads the TLS certificate", () => {
  const dir = scratchDir("sighup-tls");
  const make = (name: string) => {
    const files = {
      certFile: join(dir, `${name}.crt`),
      keyFile: join(dir, `${name}.key`),
      commonName: name,
      altNames: ["DNS:localhost", "IP:127.0.0.1"],
    };
    writeSelfSigned(files);
    return files;
  };
  const first = make("first");
  const second = make("second");
  const live = { cert: join(dir, "tls.crt"), key: join(dir, "tls.key") };
  const install = (files: { certFile: string; keyFile: string }) => {
    copyFileSync(files.certFile, live.cert);
    copyFileSync(files.keyFile, live.key);
  };

  it("serves new connections the new certificate, keeps open ones, and keeps it over a bad one", async () => {
    install(first);
    const server = await spawnSpillway([
      "--backend",
      "memory",
      "--tls-cert",
      live.cert,
      "--tls-key",
      live.key,
    ]);
    const open = http2.connect(server.url, { ca: readFileSync(first.certFile) });
    try {
      expect(await servedName(server.url)).toBe("first");
      expect(await getServerInfoOn(open)).toBe(200);

      install(second);
      await hangUp(server, "TLS certificate reloaded");
      expect(await servedName(server.url)).toBe("second");
      // A client that verifies: trusting the new certificate it connects, trusting only the
      // old one it is refused.
      const trusting = (ca: string) =>
        createSpillwayClient({ baseUrl: server.url, tls: { ca: readFileSync(ca) } });
      expect((await trusting(second.certFile).serverInfo()).backend).toBe("memory");
      await expect(trusting(first.certFile).serverInfo()).rejects.toThrow(
        /self.signed|certificate/i,
      );
      // The connection made before the reload still serves calls, on the old certificate.
      expect(await getServerInfoOn(open)).toBe(200);
      expect(
        (
          open.socket as unknown as { getPeerCertificate(): { subject: { CN: string } } }
        ).getPeerCertificate().subject.CN,
      ).toBe("first");

      // A garbled certificate, then a key that does not match: each is logged with its path
      // and the certificate in force stays.
      writeFileSync(live.cert, "not a certificate\n");
      await hangUp(server, "TLS certificate reload failed");
      expect(server.output()).toContain(`--tls-cert: ${live.cert}: holds no PEM certificate`);
      expect(await servedName(server.url)).toBe("second");
      copyFileSync(first.certFile, live.cert);
      copyFileSync(second.keyFile, live.key);
      await hangUp(server, "TLS certificate reload failed");
      expect(server.output()).toContain(
        `--tls-key: ${live.key}: does not match the certificate in ${live.cert}`,
      );
      expect(await servedName(server.url)).toBe("second");
      expect((await trusting(second.certFile).serverInfo()).backend).toBe("memory");

      // Fixed files take effect on the next SIGHUP.
      install(first);
      await hangUp(server, "TLS certificate reloaded");
      expect(await servedName(server.url)).toBe("first");
    } finally {
      open.destroy();
      await server.stop();
    }
  });

  it("reloads the client CA bundle: a client the new bundle trusts connects, one it dropped does not", async () => {
    const serverFiles = make("server");
    const alice = make("alice");
    const bob = make("bob");
    const clientCa = join(dir, "client-ca.crt");
    copyFileSync(alice.certFile, clientCa);
    const server = await spawnSpillway([
      "--backend",
      "memory",
      "--tls-cert",
      serverFiles.certFile,
      "--tls-key",
      serverFiles.keyFile,
      "--tls-client-ca",
      clientCa,
    ]);
    // Each call gets a transport of its own, so each is a new connection and handshake.
    const callAs = (client: { certFile: string; keyFile: string }) =>
      createClient(
        SpillwayService,
        createGrpcTransport({
          baseUrl: server.url,
          nodeOptions: {
            ca: readFileSync(serverFiles.certFile),
            cert: readFileSync(client.certFile),
            key: readFileSync(client.keyFile),
          },
        }),
      ).getServerInfo({});
    try {
      expect((await callAs(alice)).backend).toBe("memory");
      await expect(callAs(bob)).rejects.toThrow();
      copyFileSync(bob.certFile, clientCa);
      await hangUp(server, "TLS certificate reloaded");
      expect((await callAs(bob)).backend).toBe("memory");
      await expect(callAs(alice)).rejects.toThrow();
      // An emptied bundle would refuse every client: it is refused and Bob stays trusted.
      writeFileSync(clientCa, "");
      await hangUp(server, "TLS certificate reload failed");
      expect(server.output()).toContain(`--tls-client-ca: ${clientCa}: holds no PEM certificate`);
      expect((await callAs(bob)).backend).toBe("memory");
    } finally {
      await server.stop();
    }
  });
});

describe("SIGHUP reloads the token file", () => {
  it("takes a new token, and keeps the tokens in force over a broken file, naming its path", async () => {
    const dir = scratchDir("sighup-tokens");
    const tokenFile = join(dir, "tokens");
    const { hashToken } = await import("../server/src/auth.js");
    writeFileSync(tokenFile, `${hashToken("one")} acme\n`);
    const server = await spawnSpillway(["--backend", "memory", "--token-file", tokenFile]);
    const tenantOf = (token: string) =>
      createSpillwayClient({ baseUrl: server.url, token }).raw.getServerInfo({});
    try {
      expect((await tenantOf("one")).tenant).toBe("acme");
      writeFileSync(tokenFile, `${hashToken("one")} acme\n${hashToken("two")} beta\n`);
      await hangUp(server, "token file reloaded");
      expect((await tenantOf("two")).tenant).toBe("beta");
      writeFileSync(tokenFile, `${hashToken("three")} ../escape\n`);
      await hangUp(server, "token file reload failed");
      expect(server.output()).toContain(
        `--token-file: ${tokenFile}: token file line 1: invalid tenant`,
      );
      expect((await tenantOf("two")).tenant).toBe("beta");
      await expect(tenantOf("three")).rejects.toThrow(/unknown bearer token/);
    } finally {
      await server.stop();
    }
  });
});

describe("SIGHUP without a token file or TLS", () => {
  it("keeps serving and reloads nothing", async () => {
    const server = await spawnSpillway(["--backend", "memory"]);
    try {
      // Node's default for SIGHUP is to exit; a stray one (a closing terminal) must not.
      server.kill("SIGHUP");
      const client = createSpillwayClient({ baseUrl: server.url });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await client.raw.getServerInfo({})).tenant).toBe("dev");
      expect(server.output()).not.toMatch(/reloaded|reload failed/);
    } finally {
      await server.stop();
    }
    expect(await server.exited).toEqual({ code: 0, signal: null });
  });
});

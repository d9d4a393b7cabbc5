import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "@spillway/proto/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "@spillway/proto/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "@spillway/proto/grpc/reflection/v1alpha/reflection_pb.js";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { writeSelfSigned } from "./support/self-signed.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { bufPath, grpcurlPath, runTool } from "./support/tools.js";

const grpcurl = grpcurlPath();
const servedServices = [
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
  "spillway.v1.SpillwayService",
];

/** host:port of a server URL, as grpcurl takes it. */
const target = (url: string) => new URL(url).host;

describe("gRPC server reflection", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory" });
  });
  afterAll(() => t.stop());

  it("lets grpcurl list the services with no proto files", async () => {
    const run = await runTool(grpcurl, ["-plaintext", target(t.url), "list"]);
    expect(run.stderr).toBe("");
    expect(run.stdout.trim().split("\n").sort()).toEqual(servedServices);
  });

  it("lets grpcurl describe the service, and messages carrying protovalidate rules", async () => {
    const service = await runTool(grpcurl, [
      "-plaintext",
      target(t.url),
      "describe",
      "spillway.v1.SpillwayService",
    ]);
    expect(service.code, service.stderr).toBe(0);
    expect(service.stdout).toContain("service SpillwayService {");
    for (const rpc of ["Offload", "ReadToolOutput", "GetServerInfo", "ListRuns"]) {
      expect(service.stdout).toMatch(new RegExp(`rpc ${rpc} \\(`));
    }
    const message = await runTool(grpcurl, [
      "-plaintext",
      target(t.url),
      "describe",
      "spillway.v1.ReadToolOutputRequest",
    ]);
    expect(message.code, message.stderr).toBe(0);
    expect(message.stdout).toContain("string run_id = 1");
    expect(message.stdout).toContain("buf.validate.field");
  });

  it("lets grpcurl call GetServerInfo and stream an Offload, JSON in and out", async () => {
    const info = await runTool(grpcurl, [
      "-plaintext",
      "-d",
      "{}",
      target(t.url),
      "spillway.v1.SpillwayService/GetServerInfo",
    ]);
    expect(info.code, info.stderr).toBe(0);
    expect(JSON.parse(info.stdout)).toMatchObject({ backend: "memory", tenant: "dev" });
    const offload = await runTool(
      grpcurl,
      ["-plaintext", "-d", "@", target(t.url), "spillway.v1.SpillwayService/Offload"],
      {
        input:
          '{"header":{"key":{"tenant":"dev","runId":"refl","callId":"c"}}}\n' +
          `{"chunk":"${Buffer.from("alpha\nbeta\n").toString("base64")}"}\n`,
      },
    );
    expect(offload.code, offload.stderr).toBe(0);
    expect(JSON.parse(offload.stdout)).toMatchObject({ attachment: { handle: "res_c" } });
  });

  it("lets buf curl list the methods and call one with no schema", async () => {
    const list = await runTool(bufPath, ["curl", "--list-methods", t.url]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain("spillway.v1.SpillwayService/GetServerInfo");
    const call = await runTool(bufPath, [
      "curl",
      "-d",
      "{}",
      `${t.url}/spillway.v1.SpillwayService/GetServerInfo`,
    ]);
    expect(call.code, call.stderr).toBe(0);
    expect(JSON.parse(call.stdout)).toMatchObject({ backend: "memory" });
  });

  for (const [version, service] of [
    ["v1", ServerReflectionV1],
    ["v1alpha", ServerReflectionV1alpha],
  ] as const) {
    it(`answers ${version} with every file a symbol needs, and NOT_FOUND for an unknown one`, async () => {
      const client = createClient(service, createGrpcTransport({ baseUrl: t.url }));
      const requests = async function* () {
        yield { messageRequest: { case: "listServices" as const, value: "" } };
        yield {
          messageRequest: {
            case: "fileContainingSymbol" as const,
            value: "spillway.v1.SpillwayService.Offload",
          },
        };
        yield { messageRequest: { case: "fileContainingSymbol" as const, value: "no.Such" } };
        yield {
          messageRequest: { case: "fileByFilename" as const, value: "spillway/v1/types.proto" },
        };
      };
      const answers = [];
      for await (const res of client.serverReflectionInfo(requests())) answers.push(res);
      expect(answers).toHaveLength(4);
      const [list, files, missing, again] = answers.map((a) => a.messageResponse);
      expect(
        list?.case === "listServicesResponse" && list.value.service.map((s) => s.name),
      ).toEqual(expect.arrayContaining(servedServices));
      expect(files?.case).toBe("fileDescriptorResponse");
      const protos =
        files?.case === "fileDescriptorResponse"
          ? files.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b))
          : [];
      expect(protos[0]?.name).toBe("spillway/v1/spillway.proto");
      const names = protos.map((p) => p.name);
      for (const dep of [
        "spillway/v1/types.proto",
        "buf/validate/validate.proto",
        "google/protobuf/descriptor.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/timestamp.proto",
      ]) {
        expect(names).toContain(dep);
      }
      // Everything resolves: a registry built from the files alone, imports first, has the service.
      const ordered: typeof protos = [];
      const place = (name: string) => {
        const proto = protos.find((p) => p.name === name);
        if (proto === undefined) throw new Error(`${name} was not sent`);
        if (ordered.includes(proto)) return;
        for (const dep of proto.dependency) place(dep);
        ordered.push(proto);
      };
      for (const proto of protos) place(proto.name);
      const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }));
      expect(registry.getService(SpillwayService.typeName)?.methods.length).toBe(
        SpillwayService.methods.length,
      );
      expect(missing?.case === "errorResponse" && missing.value.errorCode).toBe(5);
      // A file already sent comes back when asked for again, without its imports a second time.
      expect(
        again?.case === "fileDescriptorResponse" && again.value.fileDescriptorProto.length,
      ).toBe(1);
    });
  }
});

describe("reflection with a token file, and over TLS", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory", tokens: { "token-a": "tenant-a" } });
  });
  afterAll(() => t.stop());

  it("refuses reflection without a token, like every call but health, and serves it with one", async () => {
    const refused = await runTool(grpcurl, ["-plaintext", target(t.url), "list"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Unauthenticated/);
    const listed = await runTool(grpcurl, [
      "-plaintext",
      "-H",
      "authorization: Bearer token-a",
      target(t.url),
      "list",
    ]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain("spillway.v1.SpillwayService");
    const bufCall = await runTool(bufPath, [
      "curl",
      "-H",
      "authorization: Bearer token-a",
      "--reflect-header",
      "*",
      "-d",
      "{}",
      `${t.url}/spillway.v1.SpillwayService/GetServerInfo`,
    ]);
    expect(bufCall.code, bufCall.stderr).toBe(0);
    expect(JSON.parse(bufCall.stdout)).toMatchObject({ tenant: "tenant-a" });
    const health = createClient(Health, createGrpcTransport({ baseUrl: t.url }));
    expect((await health.check({ service: SpillwayService.typeName })).status).toBe(1);
  });

  it("serves reflection over TLS", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-reflection-tls-"));
    let server: SpillwayServer | undefined;
    try {
      const certFile = join(dir, "cert.pem");
      writeSelfSigned({
        certFile,
        keyFile: join(dir, "cert.key"),
        commonName: "localhost",
        altNames: ["DNS:localhost", "IP:127.0.0.1"],
      });
      server = await startSpillwayServer({
        backend: createMemoryBackend(),
        port: 0,
        tls: { certFile, keyFile: join(dir, "cert.key") },
      });
      const run = await runTool(grpcurl, [
        "-cacert",
        certFile,
        "-d",
        "{}",
        target(server.url),
        "spillway.v1.SpillwayService/GetServerInfo",
      ]);
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ backend: "memory" });
    } finally {
      await server?.close(1000);
      await rm(dir, { recursive: true, force: true });
    }
  });
});

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./support/test-server.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** One ReadToolOutputResponse as proto-loader decodes it (oneofs: true, longs: String). */
interface Frame {
  frame: "header" | "content" | "trailer";
  trailer?: { rendered: string; next_offset?: string };
}

interface GrpcStub extends grpc.Client {
  Offload(
    metadata: grpc.Metadata,
    callback: (
      err: grpc.ServiceError | null,
      res?: { attachment: Record<string, unknown> },
    ) => void,
  ): grpc.ClientWritableStream<unknown>;
  ReadToolOutput(req: unknown, metadata: grpc.Metadata): grpc.ClientReadableStream<Frame>;
}

/**
 * A plain @grpc/grpc-js client built at run time from the API's descriptors, as a runtime in
 * any language would, proves the server speaks standard gRPC and not only Connect's dialect.
 */
describe("wire interop with @grpc/grpc-js", () => {
  let t: TestServer;
  let stub: GrpcStub;
  let imageDir: string;
  const md = () => {
    const m = new grpc.Metadata();
    m.set("authorization", "Bearer grpc-token");
    return m;
  };

  beforeAll(async () => {
    t = await startTestServer({ tokens: { "grpc-token": "acme" } });
    // protobufjs cannot parse protovalidate's extension syntax in .proto text, so the client
    // loads the compiled descriptor set that `buf build` makes from the same files.
    imageDir = await mkdtemp(join(tmpdir(), "spillway-grpcjs-"));
    const image = join(imageDir, "image.binpb");
    execFileSync(
      join(root, "node_modules/.bin/buf"),
      ["build", "--as-file-descriptor-set", "-o", image],
      {
        cwd: root,
      },
    );
    const def = protoLoader.loadFileDescriptorSetFromBuffer(await readFile(image), {
      keepCase: true,
      longs: String,
      defaults: true,
      oneofs: true,
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      spillway: {
        v1: {
          SpillwayService: new (
            addr: string,
            creds: grpc.ChannelCredentials,
            opts?: object,
          ) => GrpcStub;
        };
      };
    };
    stub = new pkg.spillway.v1.SpillwayService(
      new URL(t.url).host,
      grpc.credentials.createInsecure(),
      { "grpc.max_receive_message_length": 64 * 1024 * 1024 },
    );
  });
  afterAll(async () => {
    stub.close();
    await t.stop();
    await rm(imageDir, { recursive: true, force: true });
  });

  it("offloads over a client stream and reads a window back over a server stream", async () => {
    const payload = Buffer.from(
      Array.from({ length: 20_000 }, (_, i) => `row ${i + 1}`).join("\n"),
    );
    const attachment = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const call = stub.Offload(md(), (err, res) =>
        err ? reject(err) : resolve(res?.attachment ?? {}),
      );
      call.write({
        header: { key: { tenant: "acme", run_id: "g", call_id: "c" }, content_type: "text/plain" },
      });
      for (let i = 0; i < payload.length; i += 50_000)
        call.write({ chunk: payload.subarray(i, i + 50_000) });
      call.end();
    });
    expect(attachment.sha256).toBe(createHash("sha256").update(payload).digest("hex"));
    expect(attachment.line_count).toBe("20000");

    const frames: Frame[] = [];
    await new Promise<void>((resolve, reject) => {
      const call = stub.ReadToolOutput(
        { run_id: "g", handle: "res_c", lines: { offset: 14_999, limit: 2 } },
        md(),
      );
      call.on("data", (f) => frames.push(f));
      call.on("end", () => resolve());
      call.on("error", reject);
    });
    const trailer = frames.find((f) => f.frame === "trailer")?.trailer;
    expect(trailer?.rendered).toContain(" 15000\trow 15000\n");
    expect(trailer?.rendered).toContain(" 15001\trow 15001\n");
    expect(trailer?.next_offset).toBe("15001");
  });

  it("receives the precise status code for a forged handle", async () => {
    const err = await new Promise<grpc.ServiceError>((resolve) => {
      const call = stub.ReadToolOutput({ run_id: "g", handle: "res_forged" }, md());
      call.on("data", () => {});
      call.on("error", resolve);
    });
    expect(err.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(err.details).toContain("invalid_deferred_handle");
  });
});

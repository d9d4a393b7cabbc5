import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { checkBaseUrl } from "./base-url.js";
import { createSpillwayClient } from "./client.js";

describe("checkBaseUrl", () => {
  it("refuses a server address without http:// or https://, saying the form it wants", () => {
    for (const baseUrl of ["127.0.0.1:50051", "localhost:50051", "grpc://host:1", "http://", ""]) {
      expect(() => createSpillwayClient({ baseUrl }), baseUrl).toThrow(
        expect.objectContaining({
          code: Code.InvalidArgument,
          rawMessage: `baseUrl must be http://host:port or https://host:port (e.g. http://127.0.0.1:50051), got ${JSON.stringify(baseUrl)}`,
        }),
      );
    }
  });

  it("takes http and https URLs, with or without a port or a trailing slash", () => {
    for (const url of ["http://127.0.0.1:50051", "https://spillway.internal", "http://[::1]:1/"]) {
      expect(checkBaseUrl(url)).toBe(url);
    }
  });
});

import { describe, expect, it } from "vitest";
import { rpcBaseUrl } from "./rpc-base-url.js";

describe("the inspector's RPC address", () => {
  it("is the folder above the page's, keeping a reverse proxy's path prefix", () => {
    expect(rpcBaseUrl("http://127.0.0.1:50051/inspector/")).toBe("http://127.0.0.1:50051");
    expect(rpcBaseUrl("https://ops.example/spillway/inspector/?x=1#top")).toBe(
      "https://ops.example/spillway",
    );
    expect(rpcBaseUrl("https://ops.example/a/b/inspector/")).toBe("https://ops.example/a/b");
  });
});

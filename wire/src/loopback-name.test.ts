import { describe, expect, it } from "vitest";
import { isLoopbackHostHeader, isLoopbackName } from "./loopback-name.js";

describe("isLoopbackName", () => {
  it("knows every spelling of the loopback addresses and names, and nothing else", () => {
    for (const name of [
      "127.0.0.1",
      "127.0.0.2",
      "127.255.255.254",
      "localhost",
      "LOCALHOST",
      "::1",
      "[::1]",
      "0:0:0:0:0:0:0:1",
      "::ffff:127.0.0.1",
      "[::ffff:7f00:1]",
    ]) {
      expect(isLoopbackName(name), name).toBe(true);
    }
    for (const name of [
      "128.0.0.1",
      "0.0.0.0",
      "::",
      "::ffff:10.0.0.1",
      "localhost.evil",
      "evil.example",
      "1.2.3.4",
    ]) {
      expect(isLoopbackName(name), name).toBe(false);
    }
  });
});

describe("isLoopbackHostHeader", () => {
  it("takes a loopback name or address with any port, *.localhost too, and nothing else", () => {
    for (const host of [
      "127.0.0.1:50051",
      "localhost",
      "app.localhost:8080",
      "[::1]:1",
      "127.0.0.2",
    ]) {
      expect(isLoopbackHostHeader(host), host).toBe(true);
    }
    for (const host of [
      undefined,
      "",
      "attacker.example:50051",
      "localhost.evil",
      "[::]:1",
      "a b",
    ]) {
      expect(isLoopbackHostHeader(host), String(host)).toBe(false);
    }
  });
});

import { describe, expect, it } from "vitest";
import { capClientDeadline, maxClientDeadlineMs } from "./client-deadline.js";

describe("capClientDeadline", () => {
  it("cuts a deadline longer than a timer can wait to 596 hours, on either protocol's header", () => {
    for (const [header, asked, kept] of [
      ["grpc-timeout", "99999999H", "596H"],
      ["grpc-timeout", "597H", "596H"],
      ["grpc-timeout", "36000000S", "596H"],
      ["grpc-timeout", "596H", "596H"],
      ["grpc-timeout", "2145600000m", "2145600000m"],
      ["grpc-timeout", "300m", "300m"],
      ["connect-timeout-ms", "9999999999", String(maxClientDeadlineMs)],
      ["connect-timeout-ms", "2145600000", "2145600000"],
      // Malformed: left for the protocol to refuse with INVALID_ARGUMENT.
      ["grpc-timeout", "1d", "1d"],
      ["connect-timeout-ms", "99999999999", "99999999999"],
    ] as const) {
      const headers: Record<string, string> = { [header]: asked };
      capClientDeadline(headers);
      expect(headers[header], `${header}: ${asked}`).toBe(kept);
    }
    expect(maxClientDeadlineMs).toBeLessThanOrEqual(2 ** 31 - 1);
  });
});

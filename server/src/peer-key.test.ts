import { describe, expect, it } from "vitest";
import { peerOf } from "./peer-key.js";

describe("peerOf", () => {
  it("names an IPv4 peer by its address, mapped or not", () => {
    expect(peerOf("10.1.2.3")).toBe("10.1.2.3");
    expect(peerOf("::ffff:10.1.2.3")).toBe("10.1.2.3");
  });

  it("names an IPv6 peer by its /64, however the address is written", () => {
    expect(peerOf("2001:db8:0:1::5")).toBe("2001:db8:0:1::/64");
    expect(peerOf("2001:0db8:0000:0001:ffff:1:2:3")).toBe("2001:db8:0:1::/64");
    expect(peerOf("::1")).toBe("0:0:0:0::/64");
    expect(peerOf("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
  });

  it("names a peer without an address unknown", () => {
    expect(peerOf(undefined)).toBe("unknown");
    expect(peerOf("")).toBe("unknown");
  });
});

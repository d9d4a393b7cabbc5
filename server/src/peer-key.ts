import { isIPv6 } from "node:net";
import { createContextKey } from "@connectrpc/connect";

/**
 * peerKey holds, in a call's context values, the network peer the call came from as peerOf
 * names it: what per-peer fairness (health Watch streams) goes by. Unset: "unknown".
 */
export const peerKey = createContextKey<string>("unknown", { description: "network peer" });

/**
 * peerOf names the peer of a connection from its remote address: an IPv4 address as it is (an
 * IPv4-mapped IPv6 one as IPv4), an IPv6 address by its /64 prefix (one host usually holds a
 * whole /64, so single addresses would let it be a million peers), anything else "unknown".
 */
export function peerOf(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined || remoteAddress === "") return "unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remoteAddress);
  if (mapped !== null) return mapped[1] as string;
  if (!isIPv6(remoteAddress)) return remoteAddress;
  const [head = "", tail = ""] = remoteAddress.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === "" ? [] : tail.split(":");
  const groups = remoteAddress.includes("::")
    ? [...left, ...Array(8 - left.length - right.length).fill("0"), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}

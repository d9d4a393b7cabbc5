import { isIP } from "node:net";

/**
 * isLoopbackName says whether a host name or address (bare, or bracketed as a URL's hostname
 * gives IPv6) names this machine's loopback: `localhost`, any IPv4 address in 127.0.0.0/8, and
 * `::1` or an IPv4-mapped 127.x address in any IPv6 spelling. A bind address it accepts only
 * takes local connections.
 */
export function isLoopbackName(name: string): boolean {
  const bare = (name.startsWith("[") && name.endsWith("]") ? name.slice(1, -1) : name)
    .toLowerCase()
    .replace(/\.$/, "");
  if (bare === "localhost") return true;
  const kind = isIP(bare);
  if (kind === 4) return bare.startsWith("127.");
  if (kind !== 6) return false;
  // The URL parser writes every IPv6 spelling one way: ::1, and ::ffff:7fxx:xxxx for 127/8.
  const canonical = new URL(`http://[${bare}]`).hostname;
  return canonical === "[::1]" || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(canonical);
}

/**
 * isLoopbackHostHeader says whether an HTTP `Host` header (any port) names this machine by a
 * loopback name or address, `*.localhost` (RFC 6761) included: what a page re-pointed at the
 * loopback by DNS rebinding never sends, since its Host is its own name.
 */
export function isLoopbackHostHeader(host: string | undefined): boolean {
  if (host === undefined) return false;
  let hostname: string;
  try {
    hostname = new URL(`http://${host}`).hostname.toLowerCase();
  } catch {
    return false;
  }
  return isLoopbackName(hostname) || hostname.endsWith(".localhost");
}

import { Code, ConnectError } from "@connectrpc/connect";

/**
 * reservedSegmentPrefix starts the names a backend gives its own in-progress writes (the
 * filesystem backend's temp files); no key segment may start with it. The service never
 * produces one: its encoded segments never start with `.`.
 */
export const reservedSegmentPrefix = ".tmp-";

/**
 * maxKeySegments bounds how many `/`-separated segments a key has (the service's deepest key
 * has seven), so a walk of a filesystem root never goes deeper than this, whatever is planted.
 */
export const maxKeySegments = 32;

/** Longest part of a refused value an error message repeats. */
const shownChars = 128;

/**
 * checkKey refuses a key that could name anything outside a backend's root or prefix, and
 * returns it unchanged otherwise.
 *
 * Guarantees: the key is non-empty and relative (no leading `/`), has at most maxKeySegments
 * segments, and every `/`-separated segment is non-empty, is not `.` or `..`, holds no `\` or NUL, and does not start with
 * `reservedSegmentPrefix`; anything else is `INVALID_ARGUMENT`. Every backend checks keys
 * through it, so a key one backend accepts every backend accepts.
 */
export function checkKey(key: string): string {
  checkPath(key, key, "key");
  return key;
}

/**
 * checkListPrefix refuses a list prefix that could reach outside a backend's root or prefix.
 *
 * Guarantees: `""` (everything) is accepted; any other prefix must be a key that
 * `checkKey` accepts, optionally followed by one `/`. A prefix may end in the middle of a
 * segment (`r/ru` lists `r/run1/x`); that partial segment follows the segment rules too.
 * Anything else is `INVALID_ARGUMENT`.
 */
export function checkListPrefix(prefix: string): void {
  if (prefix !== "") checkPath(withoutTrailingSlash(prefix), prefix, "prefix");
}

/**
 * checkRootPrefix turns a configured key prefix (the part of a bucket a backend owns) into the
 * string put before every key.
 *
 * Guarantees: the prefix follows the `checkListPrefix` rules (so it is `""` or a valid key,
 * optionally followed by `/`), and comes back as `""` or ending in exactly one `/`; anything
 * else is `INVALID_ARGUMENT`.
 */
export function checkRootPrefix(prefix: string): string {
  checkListPrefix(prefix);
  return prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
}

function withoutTrailingSlash(value: string): string {
  return value.endsWith("/") ? value.slice(0, -1) : value;
}

/** Checks the segments of path; errors name `whole`, the value as the caller gave it. */
function checkPath(path: string, whole: string, what: string): void {
  if (whole.startsWith("/")) throw invalid(what, whole, "must be relative");
  if (path === "") throw invalid(what, whole, "must not be empty");
  const segments = path.split("/");
  if (segments.length > maxKeySegments) {
    throw invalid(what, whole, `has more than ${maxKeySegments} segments`);
  }
  for (const segment of segments) {
    if (segment === "") throw invalid(what, whole, "has an empty segment");
    if (segment === "." || segment === "..") {
      throw invalid(what, whole, "has a '.' or '..' segment");
    }
    if (segment.includes("\\")) throw invalid(what, whole, "has a backslash");
    if (segment.includes("\0")) throw invalid(what, whole, "has a NUL byte");
    if (segment.startsWith(reservedSegmentPrefix)) {
      throw invalid(what, whole, `has a reserved '${reservedSegmentPrefix}' segment`);
    }
  }
}

function invalid(what: string, value: string, why: string): ConnectError {
  const shown = JSON.stringify(
    value.length > shownChars ? `${value.slice(0, shownChars)}…` : value,
  );
  return new ConnectError(`${what} ${shown} ${why}`, Code.InvalidArgument);
}

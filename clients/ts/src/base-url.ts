import { Code, ConnectError } from "@connectrpc/connect";

/**
 * checkBaseUrl returns `url` when it is an `http://` or `https://` URL with a host, the form
 * createSpillwayClient connects to; otherwise it throws INVALID_ARGUMENT saying the form, so
 * that `127.0.0.1:50051` (no scheme) is refused when the client is made rather than as a bare
 * "Invalid URL", or, for `localhost:50051` (which parses with the scheme `localhost:`), at the
 * first call.
 */
export function checkBaseUrl(url: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL at all: refused below with the same message.
  }
  if ((parsed?.protocol !== "http:" && parsed?.protocol !== "https:") || parsed.host === "") {
    throw new ConnectError(
      `baseUrl must be http://host:port or https://host:port (e.g. http://127.0.0.1:50051), got ${JSON.stringify(url)}`,
      Code.InvalidArgument,
    );
  }
  return url;
}

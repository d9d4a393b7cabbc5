/**
 * rpcBaseUrl is where the server that served the page at `pageUrl` answers RPCs: the folder
 * above the page's (`https://host/` for `https://host/inspector/`, `https://host/spillway/`
 * for `https://host/spillway/inspector/` behind a reverse proxy), without its final slash.
 */
export function rpcBaseUrl(pageUrl: string): string {
  return new URL("..", pageUrl).href.replace(/\/$/, "");
}

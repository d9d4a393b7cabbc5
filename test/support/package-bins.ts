import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/**
 * packageFile is the path of `file` inside the installed package `name` (resolved from the
 * workspace, so it is the compiled output test/global-setup/build.ts builds).
 */
export function packageFile(name: string, file: string): string {
  return require.resolve(`${name}/package.json`).replace(/package\.json$/, file);
}

/** spillwayClientCli is the compiled `spillway-cli` bin, as npm links it. */
export const spillwayClientCli = packageFile("@spillway/cli", "bin/spillway-cli.js");

/** spillwayMcp is the compiled `spillway-mcp` bin, as npm links it. */
export const spillwayMcp = packageFile("@spillway/mcp", "bin/spillway-mcp.js");

/** spillwayMcpProxy is the compiled `spillway-mcp-proxy` bin, as npm links it. */
export const spillwayMcpProxy = packageFile("@spillway/mcp", "bin/spillway-mcp-proxy.js");

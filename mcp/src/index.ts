/**
 * `@spillway/mcp`: an MCP server in front of a Spillway service. The `spillway-mcp` bin runs
 * it over stdio or Streamable HTTP; these exports embed it in another program.
 */
export {
  type AttachmentSummary,
  parseResourceUri,
  resourceUri,
  summarizeAttachment,
} from "./attachment-json.js";
export { runMain, runMcp } from "./cli.js";
export { describeConnectError, grpcStatusLine } from "./grpc-error-text.js";
export { type McpProxy, type McpProxyOptions, startMcpProxy } from "./mcp-proxy.js";
export { type McpOptions, type McpUsageError, mcpUsage, parseMcpOptions } from "./options.js";
export {
  type McpProxyConfig,
  mcpProxyUsage,
  parseMcpProxyArgs,
  runMcpProxy,
  runProxyMain,
} from "./proxy-cli.js";
export {
  createSpillwayMcpServer,
  createSpillwayToolHandler,
  type SpillwayMcpOptions,
  type SpillwayToolHandler,
  spillwayMcpTools,
} from "./spillway-mcp-server.js";
export {
  createSpillwayResources,
  type JsonRpcError,
  jsonRpcError,
  type SpillwayResources,
  spillwayResourceTemplate,
} from "./spillway-resources.js";
export { type StreamableHttpEndpoint, serveStreamableHttp } from "./streamable-http.js";

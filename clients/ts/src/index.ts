/**
 * The Spillway TypeScript SDK: the client, its gRPC transport, the elision policy, the
 * `read_tool_output` model tool and the retry helper, as named re-exports. The generated
 * messages come from `@spillway/proto`.
 */

export {
  type ByteRange,
  createSpillwayClient,
  type ForkRunOptions,
  type ListOptions,
  type ListPage,
  type OffloadData,
  type OffloadKey,
  type OffloadOptions,
  type OffloadResult,
  type ReadBytesOptions,
  type ReadToolOutputInit,
  type RunsPage,
  type SpillwayCallOptions,
  type SpillwayClient,
  type SpillwayClientOptions,
  type Window,
} from "./client.js";
export {
  createElisionPolicy,
  type ElisionAction,
  type ElisionBand,
  type ElisionInput,
  type ElisionPolicy,
  type ElisionPolicyOptions,
  type ElisionResult,
  type ToolElisionOverride,
} from "./elision-policy.js";
export { createGrpcTransport, type GrpcTransportOptions } from "./grpc-transport.js";
export {
  createGrpcWebTransport,
  createKeepAliveAgent,
  type GrpcWebTransportOptions,
  isHttp1Refusal,
} from "./grpc-web-transport.js";
export {
  type AttemptTracker,
  createAttemptTracker,
  maxAttempt,
  offloadNextAttempt,
} from "./offload-next-attempt.js";
export {
  createReadToolOutputExecutor,
  createReadToolOutputRunner,
  type ReadToolOutputExecutorOptions,
  type ReadToolOutputOutcome,
  readToolOutputTool,
  readToolOutputToolName,
  type ToolDefinition,
} from "./read-tool-output-tool.js";
export {
  type AttachmentJson,
  attachmentJson,
  type RunInfoJson,
  runInfoJson,
} from "./record-json.js";
export type { SplitBytesField } from "./response-queue.js";
export {
  isTransientError,
  type RetryBudget,
  type RetryCall,
  type RetryOptions,
  retryBudget,
  retryUnavailable,
} from "./retry.js";
export { type ClientTlsOptions, createWideWindowSessionManager } from "./session-manager.js";
export { createSessionPool, type Sessions } from "./session-pool.js";
export {
  type SummarizeAction,
  type Summarizer,
  type SummaryFailure,
  type SummaryFailureReason,
  summarizeDefaults,
} from "./summarize-action.js";
export { matchesToolPattern } from "./tool-name-pattern.js";
export { countChars, type TruncateMode, truncateText } from "./truncate-text.js";

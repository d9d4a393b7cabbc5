"""spillway_client: the Python SDK for Spillway.

Offload large tool outputs over gRPC and read them back in bounded windows whose model text the
server renders, identically for every runtime. `ElisionPolicy` decides what the model sees of a
tool output (bands, per-tool overrides, include/exclude, summaries), as the TS SDK's does.
`SpillwayClient` blocks; `AsyncSpillwayClient` runs on grpc.aio. The generated stubs are in `spillway_client._gen` (e.g.
`spillway_client._gen.spillway.v1.spillway_pb2`); pydantic-ai agents get
`spillway_client.pydantic_ai.SpillwayToolOutputs` (the `pydantic-ai` extra), and
pydantic-ai-harness's ToolOutputLimits `spillway_client.harness` (the `harness` extra).
"""

from spillway_client.attempts import AttemptTracker, offload_next_attempt
from spillway_client.client import AsyncSpillwayClient, SpillwayClient
from spillway_client.elision_policy import Band, ElisionPolicy, ElisionResult, ToolOverride, Truncate
from spillway_client.errors import BatchItemError, DataLossError, error_info, error_reason
from spillway_client.model_text import model_text, strip_ansi
from spillway_client.read_tool_output import (
    READ_TOOL_OUTPUT_NAME,
    READ_TOOL_OUTPUT_TOOL,
    execute_read_tool_output,
    execute_read_tool_output_async,
    parse_read_tool_output_args,
)
from spillway_client.retry import RetryPolicy, is_transient_error
from spillway_client.summarize_action import Summarize, SummaryFailure
from spillway_client.window import Window

__all__ = [
    "READ_TOOL_OUTPUT_NAME",
    "READ_TOOL_OUTPUT_TOOL",
    "AsyncSpillwayClient",
    "AttemptTracker",
    "Band",
    "BatchItemError",
    "DataLossError",
    "ElisionPolicy",
    "ElisionResult",
    "RetryPolicy",
    "SpillwayClient",
    "Summarize",
    "SummaryFailure",
    "ToolOverride",
    "Truncate",
    "Window",
    "error_info",
    "error_reason",
    "execute_read_tool_output",
    "execute_read_tool_output_async",
    "is_transient_error",
    "model_text",
    "offload_next_attempt",
    "parse_read_tool_output_args",
    "strip_ansi",
]

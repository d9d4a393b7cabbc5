"""Pieces the FunctionModel scripts of the agent tests share."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart


def returns(messages: list[ModelMessage], tool: str) -> list[ToolReturnPart]:
    """The returns of `tool` in the conversation so far, in order."""
    return [
        part
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == tool
    ]


def read_calls(handle: str, reads: list[dict[str, Any]], id_prefix: str) -> ModelResponse:
    """One turn calling read_tool_output once per `reads` entry, `{handle}` in a string argument
    replaced by `handle`; call ids are `<id_prefix><index>`."""
    return ModelResponse(
        parts=[
            ToolCallPart(
                "read_tool_output",
                {k: v.format(handle=handle) if isinstance(v, str) else v for k, v in args.items()},
                tool_call_id=f"{id_prefix}{i}",
            )
            for i, args in enumerate(reads)
        ]
    )

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


MALFORMED_READS: list[tuple[str | dict[str, Any], str]] = [
    ('"{handle}"', "error: arguments must be an object with a handle"),
    ("[1, 2]", "error: arguments must be an object with a handle"),
    ('{"handle": "{handle}", "limit": ', "error: arguments are not valid JSON"),
    ({"handle": "{handle}", "ctx": 1}, 'error: unknown argument "ctx"'),
    # Valid arguments hidden in the key the tool wraps other shapes in are refused, not read.
    ('{"\\u0000arguments": "{\\"handle\\": \\"{handle}\\"}"}', 'error: unknown argument "\\u0000arguments"'),
]
"""read_tool_output calls a model may make that are not a mapping of known arguments (as JSON
text, or as the mapping a provider decoded), and the one line the tool answers each with."""


def read_calls(handle: str, reads: list[Any], id_prefix: str) -> ModelResponse:
    """One turn calling read_tool_output once per `reads` entry, `{handle}` in a string argument
    (or in arguments given as JSON text) replaced by `handle`; call ids are `<id_prefix><index>`."""
    return ModelResponse(
        parts=[
            ToolCallPart(
                "read_tool_output",
                args.replace("{handle}", handle)
                if isinstance(args, str)
                else {k: v.format(handle=handle) if isinstance(v, str) else v for k, v in args.items()},
                tool_call_id=f"{id_prefix}{i}",
            )
            for i, args in enumerate(reads)
        ]
    )

"""Spillway for pydantic-ai agents (the `pydantic-ai` extra: pydantic-ai-slim alone).

`SpillwayToolOutputs` is a pydantic-ai capability: it offloads every tool return over a size band
to Spillway, shows the model the server-rendered preview with its handle in its place, and gives
the model Spillway's `read_tool_output` tool, answered by one ReadToolOutput window per call with
the server-rendered text. `read_tool_output_tool` is that tool alone, for a capability or toolset
of one's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
from pydantic_ai import FunctionToolset, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from spillway_client._messages import utf8
from spillway_client.attempts import AttemptTracker, offload_next_attempt
from spillway_client.client import AsyncSpillwayClient
from spillway_client.elision_policy import ElisionPolicy
from spillway_client.model_text import model_text
from spillway_client.read_tool_output import (
    READ_TOOL_OUTPUT_NAME,
    READ_TOOL_OUTPUT_TOOL,
    describe_error,
    execute_read_tool_output_async,
    parse_read_tool_output_args,
)

DEFAULT_TIMEOUT = 30.0
"""Seconds each call of SpillwayToolOutputs and the harness store may take unless told otherwise:
a Spillway that stops answering costs the agent run this much per call, not the rest of its life."""


_RAW_ARGS = "\0arguments"
"""The one key of the mapping _RawArguments hands the tool for arguments that are not a JSON object
(the model cannot mean it: no argument of the tool's has a NUL in its name)."""


class _RawArguments:
    """The read tool's argument validator: it lets every argument shape through to the SDK's checks.

    pydantic-ai calls a tool's function with the validated arguments spread as keywords, which
    needs a mapping; arguments that are JSON but not an object (`"res_1"`, `[1, 2]`), or not JSON
    at all, go as `{_RAW_ARGS: <the JSON text>}` instead, so the tool answers them with the
    executor's own `error: …` line rather than pydantic-ai raising or asking for a retry. An object
    passes unchanged, and so does that wrapper validated again (as durable execution does).
    """

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> dict[str, Any]:
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
        try:
            value = json.loads(text or "{}")
        except ValueError:
            return {_RAW_ARGS: text}
        return value if isinstance(value, dict) else {_RAW_ARGS: text}

    def validate_python(self, input: Any, **_: Any) -> dict[str, Any]:
        if input is None:
            return {}
        if isinstance(input, Mapping):
            return dict(input)
        # The executor reads a str as JSON text; any other value is already decoded.
        return {_RAW_ARGS: input}


def read_tool_output_tool(
    client: AsyncSpillwayClient,
    run_of: Callable[[RunContext[Any], str], tuple[str, str]],
    *,
    timeout: float | None = None,
    adapt_args: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Tool[Any]:
    """read_tool_output_tool is Spillway's `read_tool_output` as a pydantic-ai tool.

    The definition (name, description, JSON Schema) is the SDK's, identical to the TS SDK's. Each
    call reads one window and returns exactly the server-rendered text, or one `error: ...` line
    for bad arguments and refusals; it never raises for them, whatever their shape: arguments
    that are not a JSON object (a string, a list, text that is not JSON) and unknown ones (`ctx`
    included) get the executor's line, never pydantic-ai's validation retry or an exception.
    `run_of(ctx, handle)` returns the Spillway run and handle to read for the handle the model
    gave; the run always comes from the runtime. Arguments the model gives as null count as not
    given; `adapt_args`, when given, rewrites the rest of an object's before they are checked.
    """

    async def read_tool_output(ctx: RunContext[Any], /, **args: Any) -> str:
        # ctx is positional-only, so an argument the model names `ctx` lands in args.
        if set(args) == {_RAW_ARGS}:
            problem = parse_read_tool_output_args(args[_RAW_ARGS])
            if isinstance(problem, str):
                return f"error: {problem}"
            # Arguments that check out here were wrapped by the model itself, naming the reserved
            # key: they are never read, as no run from the runtime goes with them.
            return f"error: unknown argument {json.dumps(_RAW_ARGS)}"
        given = {k: v for k, v in args.items() if v is not None}
        if adapt_args is not None:
            given = adapt_args(given)
        handle = given.get("handle")
        if not isinstance(handle, str) or handle == "":
            return await execute_read_tool_output_async(client, "run", given, timeout=timeout)
        run, given["handle"] = run_of(ctx, handle)
        return await execute_read_tool_output_async(client, run, given, timeout=timeout)

    tool = Tool.from_schema(
        read_tool_output,
        name=READ_TOOL_OUTPUT_NAME,
        description=READ_TOOL_OUTPUT_TOOL["description"],
        json_schema=READ_TOOL_OUTPUT_TOOL["parameters"],
        takes_ctx=True,
    )
    # Typed as a SchemaValidator, the validator is only ever asked to validate_json and validate_python.
    tool.function_schema = replace(tool.function_schema, validator=_RawArguments())  # type: ignore[arg-type]
    return tool


@dataclass
class SpillwayToolOutputs(AbstractCapability[Any]):
    """SpillwayToolOutputs offloads large tool returns to Spillway and reads them back in windows.

    A tool return that is a `str` (or `bytes`) of more than `over_chars` characters (bytes) is
    offloaded to `(tenant, run, "<tool_call_id>")`, run being `run_id` or else the agent run's
    id, and the model is shown the server-rendered preview naming its handle
    (`res_<tool_call_id>`) instead. A call executed again with the same tool call id (pydantic-ai
    re-running a call whose result a capability rejected with `ModelRetry`, or a run replayed
    into a fixed `run_id`) is offloaded as the call's next attempt when its output differs
    (`res@2_<tool_call_id>`, `res@3_…`; see `offload_next_attempt`), so every attempt stays
    readable; the same output again shows the same handle. Smaller returns, other values and
    `read_tool_output`'s own returns pass through untouched. The model reads with `read_tool_output` (see
    `read_tool_output_tool`), always in that same run, so a handle can only name this run's
    outputs. When Spillway cannot take the output (unreachable, refused), the model is shown the
    first `over_chars` characters and a line saying the rest was not kept; the run goes on.
    Terminal escape sequences (colour codes) are left out of a `str` return the capability shows
    (measured without them) and of the server's preview, unless `keep_ansi`; what is offloaded is
    the return as given.
    """

    client: AsyncSpillwayClient
    """The client outputs are offloaded and read through."""
    tenant: str = "dev"
    """The caller's tenant (the one its token maps to; `dev` for a dev-mode server)."""
    run_id: str | None = None
    """Keep every output in this Spillway run instead of one run per agent run."""
    over_chars: int = 10_000
    """Returns longer than this (characters, or bytes for `bytes`) are offloaded."""
    timeout: float | None = DEFAULT_TIMEOUT
    """Deadline, in seconds, of each call the capability makes (its retries included); None waits forever."""
    keep_ansi: bool = False
    """Show terminal escape sequences to the model instead of removing them (with a `policy`, its
    own `keep_ansi` decides)."""
    _toolset: AbstractToolset[Any] | None = field(default=None, init=False, repr=False, compare=False)
    policy: ElisionPolicy | None = None
    """Decides what the model sees of a `str` return in place of `over_chars` (`bytes` keep it).

    Its bands (per tool too), include/exclude and summarize actions apply, keyed as above and
    named after the tool. A summarizer's failure never ends the run (the model sees the spilled
    view); a spill Spillway refuses is shown cut as above, and one it cannot take under
    `required` preservation ends the run with the policy's `blob_store_required` error.
    """
    _attempts: AttemptTracker = field(default_factory=AttemptTracker, init=False, repr=False, compare=False)

    def run_for(self, ctx: RunContext[Any]) -> str:
        """The Spillway run this agent run's outputs are kept in."""
        return self.run_id or ctx.run_id or "run"

    def get_toolset(self) -> AbstractToolset[Any] | None:
        """The `read_tool_output` tool, built once (durable execution sees the toolset it registered)."""
        if self._toolset is None:
            tool = read_tool_output_tool(self.client, lambda ctx, h: (self.run_for(ctx), h), timeout=self.timeout)
            self._toolset = FunctionToolset([tool], id=self.id or "spillway_tool_outputs")
        return self._toolset

    async def after_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        result: Any,
    ) -> Any:
        """Offloads a return over the band and returns the server's preview in its place."""
        if self.policy is not None and isinstance(result, str):
            # The policy passes read_tool_output's windows through itself.
            return await self._apply_policy(self.policy, ctx, call, result)
        if call.tool_name == READ_TOOL_OUTPUT_NAME or not isinstance(result, str | bytes):
            return result
        shown_text = model_text(result, self.keep_ansi) if isinstance(result, str) else result
        if len(shown_text) <= self.over_chars:
            return shown_text
        data = utf8(result) if isinstance(result, str) else result
        call_id = call.tool_call_id or "call"
        try:
            attachment = await offload_next_attempt(
                self.client,
                {"tenant": self.tenant, "run_id": self.run_for(ctx), "call_id": call_id},
                data,
                self._attempts,
                name=call.tool_name,
                timeout=self.timeout,
                **({"preview": {"keep_ansi": True}} if self.keep_ansi else {}),
            )
        except grpc.RpcError as err:
            shown = shown_text[: self.over_chars] if isinstance(shown_text, str) else repr(result[: self.over_chars])
            return (
                f"{shown}\n[output cut at {self.over_chars} of {len(shown_text)}: it could not be stored "
                f"for reading back ({describe_error(err)})]"
            )
        return attachment.preview.text

    async def _apply_policy(self, policy: ElisionPolicy, ctx: RunContext[Any], call: ToolCallPart, result: str) -> str:
        key = {"tenant": self.tenant, "run_id": self.run_for(ctx), "call_id": call.tool_call_id or "call"}
        try:
            shown = await policy.apply(
                self.client,
                key,
                result,
                tool_name=call.tool_name,
                offload={"name": call.tool_name},
                timeout=self.timeout,
            )
        except grpc.RpcError as err:
            if policy.preservation == "required" and err.code() == grpc.StatusCode.UNAVAILABLE:
                raise
            text = model_text(result, policy.keep_ansi)
            return (
                f"{text[: self.over_chars]}\n[output cut at {self.over_chars} of {len(text)}: it could not be "
                f"stored for reading back ({describe_error(err)})]"
            )
        return shown.text

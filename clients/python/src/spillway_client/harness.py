"""Spillway behind pydantic-ai-harness's ToolOutputLimits (the `harness` extra's version range).

`ToolOutputLimits` calls `write(key, data)` when a tool return is spilled, with
`key = "<run_id>/<tool_call_id>.<retry><suffix>"`, shows the model the returned handle with a
preview, and its `read_tool_result` tool calls `read(handle)` and slices the bytes it gets, so
every read downloads the whole payload. `SpillwayOverflowStore` is that store: `write` offloads
to Spillway and `read` streams the payload back through bytes windows.
`spillway_tool_output_limits` is the windowed form: the same capability spilling to the same
store, whose read tool is Spillway's `read_tool_output`, answered by one ReadToolOutput window
with the server-rendered text, so a read moves the window, not the payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc
from pydantic_ai import FunctionToolset, RunContext, Tool
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai_harness.tool_output_limits import READ_TOOL_RESULT_KIND, ToolOutputLimits

from spillway_client.attempts import AttemptTracker, offload_next_attempt
from spillway_client.client import AsyncSpillwayClient
from spillway_client.pydantic_ai import DEFAULT_TIMEOUT, read_tool_output_tool

READ_WINDOW_BYTES = 8 * 1024 * 1024
"""Bytes asked for per ReadToolOutput call when `read` reassembles a payload."""

_NOT_STORED = {
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.OUT_OF_RANGE,
}
"""Refusals that mean the handle names nothing this store can read (a malformed one included)."""


def _unreadable(handle: str, err: grpc.RpcError) -> OSError:
    """_unreadable is the OSError `read` raises for a failed call, by its status code.

    pydantic-ai-harness answers any OSError from `read` with its "No stored tool result ..."
    guidance for the model, and lets every other exception end the agent run; so every failure
    becomes one: a refused handle PermissionError, an unknown or malformed one FileNotFoundError,
    and anything else (an unreachable service, a deadline, an overloaded server) ConnectionError.
    """
    code = err.code()
    name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionError(f"no stored tool output for handle {handle!r} ({name})")
    if code in _NOT_STORED:
        return FileNotFoundError(f"no stored tool output for handle {handle!r} ({name})")
    return ConnectionError(f"cannot read tool output {handle!r} from Spillway ({name})")


@dataclass
class SpillwayOverflowStore:
    """SpillwayOverflowStore keeps spilled tool outputs in Spillway (an OverflowStore).

    Pass it as `ToolOutputLimits(store=SpillwayOverflowStore(client))`. Each spill is offloaded
    to `(tenant, run, "<tool_call_id>.<retry><suffix>")`, where run is the agent run's id or
    `run_id` when set. The handle is `"<run>/res_<call>"`, or just `"res_<call>"` with `run_id`
    set. A key written again with other bytes (a run replayed into a fixed `run_id`, where the
    harness repeats its keys) is kept as that call's next attempt, `res@2_<call>` and on (see
    `offload_next_attempt`), instead of failing the spill. `read` never lets a failure end the agent run: a handle the model invents (refused by
    the server, or malformed: `../c.0`, empty, over-long, control characters), a record that is
    gone, and an unreachable service all surface as an `OSError`, which the harness answers with
    its "No stored tool result ..." guidance for the model, as its own LocalFileStore does. With
    `run_id` set, handles naming any other run are refused before a call is made; without it the
    harness does not tell `read` its agent run, so it reads the run the handle names (any run of
    the tenant). The windowed tool of `spillway_tool_output_limits` reads only the agent run's own.
    """

    client: AsyncSpillwayClient
    """The client the store offloads and reads through."""
    tenant: str = "dev"
    """The caller's tenant (the one its token maps to; `dev` for a dev-mode server)."""
    run_id: str | None = None
    """Keep every spill in this Spillway run instead of one run per agent run."""
    timeout: float | None = DEFAULT_TIMEOUT
    """Deadline, in seconds, of each call the store makes; None waits forever."""
    _attempts: AttemptTracker = field(default_factory=AttemptTracker, init=False, repr=False, compare=False)

    async def write(self, key: str, data: bytes) -> str:
        """write offloads `data` under the spill `key` and returns the handle `read` accepts."""
        agent_run, sep, call = key.partition("/")
        if not sep:
            agent_run, call = "run", key
        run = self.run_id or agent_run
        attachment = await offload_next_attempt(
            self.client,
            {"tenant": self.tenant, "run_id": run, "call_id": call},
            data,
            self._attempts,
            name=call,
            timeout=self.timeout,
        )
        return attachment.handle if self.run_id is not None else f"{run}/{attachment.handle}"

    async def read(self, handle: str) -> bytes:
        """read returns the bytes stored for `handle`, streamed back window by window.

        Raises only OSError, as the protocol asks: PermissionError for a handle the run never
        recorded, FileNotFoundError for a malformed one or one whose bytes are gone or were never
        kept, ConnectionError when Spillway cannot be reached or does not answer in time.
        """
        run, spillway_handle = self._resolve(handle)
        parts: list[bytes] = []
        offset = 0
        while True:
            try:
                window = await self.client.read_tool_output(
                    run,
                    spillway_handle,
                    bytes={"offset": offset, "limit": READ_WINDOW_BYTES},
                    omit_rendered=True,
                    timeout=self.timeout,
                )
            except grpc.RpcError as err:
                raise _unreadable(handle, err) from err
            except ValueError as err:
                # A string protobuf cannot encode (a lone surrogate) never reaches the server.
                raise FileNotFoundError(f"malformed handle {handle!r}") from err
            parts.append(window.data)
            trailer = window.trailer
            if trailer is None or trailer.eof or not trailer.HasField("next_offset"):
                return b"".join(parts)
            offset = trailer.next_offset

    def _resolve(self, handle: str) -> tuple[str, str]:
        if self.run_id is not None:
            if "/" in handle:
                raise PermissionError(f"handle {handle!r} is not in run {self.run_id!r}")
            return self.run_id, handle
        run, sep, spillway_handle = handle.rpartition("/")
        if not sep or not run or not spillway_handle:
            raise FileNotFoundError(f"malformed handle {handle!r}")
        return run, spillway_handle


@dataclass
class _WindowedToolOutputLimits(ToolOutputLimits[Any]):
    """ToolOutputLimits whose read tool is Spillway's `read_tool_output` over its SpillwayOverflowStore."""

    _windowed: AbstractToolset[Any] | None = field(default=None, init=False, repr=False, compare=False)

    def get_toolset(self) -> AbstractToolset[Any] | None:
        """The `read_tool_output` tool, built once (durable execution sees the toolset it registered)."""
        if self._windowed is None:
            store = self._store
            assert isinstance(store, SpillwayOverflowStore)
            self._windowed = FunctionToolset([_read_tool_output_tool(store)], id=self.id or "tool_output_limits")
        return self._windowed


def _read_tool_output_tool(store: SpillwayOverflowStore) -> Tool[Any]:
    """The model's read tool: Spillway's read_tool_output, in the harness's read-tool kind."""

    def run_of(ctx: RunContext[Any], handle: str) -> tuple[str, str]:
        if store.run_id is not None:
            return store.run_id, handle
        # The harness shows "<run>/res_<call>"; the server's windows name "res_<call>", which is
        # this agent run's (the run the harness keys its spills by). The run is always this one:
        # a handle naming another run is sent whole, and the server refuses it like any forged one.
        own = ctx.run_id or "run"
        run, sep, bare = handle.rpartition("/")
        return (own, bare) if sep and run == own else (own, handle)

    def harness_args(args: dict[str, Any]) -> dict[str, Any]:
        # The harness's preview spells its defaults out (`offset=0, from_end=False, pattern=None`):
        # a search takes no line position and a bytes read no from_end, so those go beside them.
        search = "pattern" in args
        if search or args.get("bytes") is True or args.get("mode") == "bytes":
            args = {k: v for k, v in args.items() if not (k == "from_end" and v is False)}
        if search and args.get("offset") == 0:
            args = {k: v for k, v in args.items() if k != "offset"}
        return args

    tool = read_tool_output_tool(store.client, run_of, timeout=store.timeout, adapt_args=harness_args)
    # The harness's kind: its preview names this tool, and its returns are never reduced again.
    tool.tool_kind = READ_TOOL_RESULT_KIND.id
    return tool


def spillway_tool_output_limits(
    client: AsyncSpillwayClient,
    *,
    tenant: str = "dev",
    run_id: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    **limits: Any,
) -> ToolOutputLimits[Any]:
    """spillway_tool_output_limits is ToolOutputLimits spilling to Spillway, read back in windows.

    Spills go to `SpillwayOverflowStore(client, tenant, run_id, timeout)`; `limits` are the other
    ToolOutputLimits fields (`bands`, `per_tool`, `tool_filter`, ...). The model's read tool is
    `read_tool_output` with the SDK tool's definition and argument rules (lines with `offset`,
    `limit`, `from_end`; search with `pattern`, `skip`, `context`, ...; bytes with `bytes`), in
    place of the harness's `read_tool_result`, and the harness's preview names it. Each call is
    one ReadToolOutput window and returns exactly the server-rendered text (a refusal: one
    `error: ...` line), so a read moves the window, never the whole payload. It accepts the
    handle the preview shows (`<run>/res_<call>`, or `res_<call>` with `run_id`) and the bare
    `res_<call>` the server's windows name, which is this agent run's.
    """
    store = SpillwayOverflowStore(client, tenant=tenant, run_id=run_id, timeout=timeout)
    return _WindowedToolOutputLimits(store=store, **limits)

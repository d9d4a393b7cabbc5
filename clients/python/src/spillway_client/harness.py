"""SpillwayOverflowStore: Spillway as the OverflowStore of pydantic-ai-harness's ToolOutputLimits.

Tested against pydantic-ai-harness 0.62.0 with pydantic-ai-slim 2.62.0 (the `harness` extra).
`ToolOutputLimits` calls `write(key, data)` when a tool return is spilled, with
`key = "<run_id>/<tool_call_id>.<retry><suffix>"`, shows the model the returned handle with a
preview, and its `read_tool_result` tool calls `read(handle)` and slices the bytes it gets.
Here `write` offloads the payload to Spillway and `read` streams it back through bytes windows,
so the payload lives in Spillway and every byte the model reads comes through gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from spillway_client.client import AsyncSpillwayClient

READ_WINDOW_BYTES = 8 * 1024 * 1024
"""Bytes asked for per ReadToolOutput call when `read` reassembles a payload."""

_MISSING = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION}


@dataclass
class SpillwayOverflowStore:
    """SpillwayOverflowStore keeps spilled tool outputs in Spillway (an OverflowStore).

    Pass it as `ToolOutputLimits(store=SpillwayOverflowStore(client))`. Each spill is offloaded
    to `(tenant, run, "<tool_call_id>.<retry><suffix>")`, where run is the agent run's id or
    `run_id` when set. The handle is `"<run>/res_<call>"`, or just `"res_<call>"` with `run_id`
    set. A handle the model invents or takes from another run is refused by the server
    (`PERMISSION_DENIED`) and surfaces as `PermissionError`, which the harness turns into a
    "no stored tool result" message for the model; with `run_id` set, handles naming any other
    run are refused before a call is made.
    """

    client: AsyncSpillwayClient
    """The client the store offloads and reads through."""
    tenant: str = "dev"
    """The caller's tenant (the one its token maps to; `dev` for a dev-mode server)."""
    run_id: str | None = None
    """Keep every spill in this Spillway run instead of one run per agent run."""
    timeout: float | None = None
    """Deadline, in seconds, of each call the store makes."""

    async def write(self, key: str, data: bytes) -> str:
        """write offloads `data` under the spill `key` and returns the handle `read` accepts."""
        agent_run, sep, call = key.partition("/")
        if not sep:
            agent_run, call = "run", key
        run = self.run_id or agent_run
        attachment = await self.client.offload(
            {"tenant": self.tenant, "run_id": run, "call_id": call}, data, name=call, timeout=self.timeout
        )
        return attachment.handle if self.run_id is not None else f"{run}/{attachment.handle}"

    async def read(self, handle: str) -> bytes:
        """read returns the bytes stored for `handle`, streamed back window by window.

        Raises PermissionError for a handle the run never recorded and FileNotFoundError for one
        whose bytes are gone or were never kept (both are OSError, as the protocol asks).
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
                if err.code() == grpc.StatusCode.PERMISSION_DENIED:
                    raise PermissionError(f"no stored tool output for handle {handle!r}") from err
                if err.code() in _MISSING:
                    raise FileNotFoundError(f"no stored tool output for handle {handle!r}") from err
                raise
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

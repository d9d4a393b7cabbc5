"""AsyncOffloadBatcher: the small offloads started together on one event loop share a call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import grpc

from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb
from spillway_client._messages import batch_outcomes
from spillway_client.errors import BatchItemError, closed_client_error

MAX_ITEMS = 256
"""Most offloads in one OffloadBatch call."""

MAX_BYTES = 1024 * 1024
"""Most payload bytes in one OffloadBatch call."""

_DEADLINE_EXCEEDED = grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
_ABORTED = grpc.StatusCode.ABORTED

SendBatch = Callable[[pb.OffloadBatchRequest, "float | None"], Awaitable[pb.OffloadBatchResponse]]
"""Sends one OffloadBatch with a timeout (seconds), retrying as the client does."""

SendOne = Callable[[pb.OffloadHeader, bytes, "float | None"], Awaitable[types_pb.ResultAttachment]]
"""Offloads one payload on its own Offload stream (for servers without OffloadBatch)."""


class _Pending:
    __slots__ = ("deadline", "future", "item")

    def __init__(self, item: pb.OffloadBatchItem, deadline: float | None, future: asyncio.Future[Any]) -> None:
        self.item = item
        self.deadline = deadline
        self.future = future


def _settle(future: asyncio.Future[Any], outcome: types_pb.ResultAttachment | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class AsyncOffloadBatcher:
    """AsyncOffloadBatcher sends the offloads started before the event loop's next turn as one
    OffloadBatch (or a few: at most MAX_ITEMS items and MAX_BYTES bytes each), with no timer, so
    a lone offload waits for nothing.

    Each offload settles like its own Offload call would: with its record, with the status the
    server gave its item (a `BatchItemError`, which is a `grpc.RpcError`), or with
    DEADLINE_EXCEEDED once its timeout passes; a cancelled one that was not sent yet is left
    out. An offload given up on after it was sent may still commit, whole, as a cancelled
    Offload may. A server that answers OffloadBatch with UNIMPLEMENTED (an older replica) gets
    every offload on its own Offload stream from then on. An offload whose item is answered
    ABORTED (nothing of it committed: the reply had no room for its answer, a merge was writing
    its handle, or a DeleteRun of its run took it away) is sent again on its own Offload stream,
    once; what that answers is the offload's outcome.
    """

    def __init__(self, send_batch: SendBatch, send_one: SendOne) -> None:
        self._send_batch = send_batch
        self._send_one = send_one
        self._queue: list[_Pending] = []
        self._scheduled = False
        self._unsupported = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def offload(self, header: pb.OffloadHeader, data: bytes, timeout: float | None) -> types_pb.ResultAttachment:
        """offload commits data under header through the next batch and returns its record."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[types_pb.ResultAttachment] = loop.create_future()
        deadline = None if timeout is None else loop.time() + timeout
        self._queue.append(_Pending(pb.OffloadBatchItem(header=header, data=data), deadline, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        if timeout is None:
            return await future
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise BatchItemError(_DEADLINE_EXCEEDED, "Deadline Exceeded") from None

    def _flush(self) -> None:
        self._scheduled = False
        ready = [p for p in self._queue if not p.future.done()]
        self._queue = []
        batch: list[_Pending] = []
        size = 0
        for pending in ready:
            n = len(pending.item.data)
            if batch and (len(batch) >= MAX_ITEMS or size + n > MAX_BYTES):
                self._spawn(self._send(batch))
                batch, size = [], 0
            batch.append(pending)
            size += n
        if batch:
            self._spawn(self._send(batch))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        # Held until done: the event loop keeps only weak references to tasks.
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Pending]) -> None:
        if self._unsupported:
            await asyncio.gather(*(self._alone(p) for p in batch))
            return
        loop = asyncio.get_running_loop()
        deadlines = [p.deadline for p in batch]
        timeout = None if None in deadlines else max(d for d in deadlines if d is not None) - loop.time()
        request = pb.OffloadBatchRequest(items=[p.item for p in batch])
        try:
            response = await self._send_batch(request, timeout)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
                self._unsupported = True
                await asyncio.gather(*(self._alone(p) for p in batch))
                return
            for p in batch:
                _settle(p.future, err)
            return
        except Exception as err:  # noqa: BLE001 - any failure must reach every waiting caller
            for p in batch:
                _settle(p.future, err)
            return
        except asyncio.CancelledError:
            # The client was closed (grpc.aio cancels its calls) or the loop is ending: the
            # callers wait on these futures, not on this task, and would wait for ever.
            for p in batch:
                _settle(p.future, closed_client_error())
            raise
        try:
            outcomes = batch_outcomes(response, len(batch))
        except RuntimeError as err:
            for p in batch:
                _settle(p.future, err)
            return
        again: list[_Pending] = []
        for p, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BatchItemError) and outcome.code() == _ABORTED:
                again.append(p)
            else:
                _settle(p.future, outcome)
        await asyncio.gather(*(self._alone(p) for p in again))

    async def _alone(self, pending: _Pending) -> None:
        if pending.future.done():
            return
        timeout = None if pending.deadline is None else pending.deadline - asyncio.get_running_loop().time()
        try:
            _settle(pending.future, await self._send_one(pending.item.header, pending.item.data, timeout))
        except grpc.RpcError as err:
            _settle(pending.future, err)
        except asyncio.CancelledError:
            _settle(pending.future, closed_client_error())
            raise

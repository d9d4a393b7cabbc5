"""SpillwayClient and AsyncSpillwayClient: the thin Python SDK over the generated stubs."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

import grpc
import grpc.aio
import grpc.experimental

from spillway_client import _messages as msg
from spillway_client._connections import RECONNECT_OPTIONS, spread_async_stub, spread_stub
from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client._gen.spillway.v1 import spillway_pb2_grpc as pb_grpc
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb
from spillway_client._offload_batcher import AsyncOffloadBatcher
from spillway_client.byte_reader import ByteRead
from spillway_client.errors import BatchItemError, StatusError, closed_client_error
from spillway_client.retry import RetryBudget, RetryPolicy, with_retries, with_retries_async
from spillway_client.window import Window, collect

MAX_RECEIVE_BYTES = 64 * 1024 * 1024
"""Largest message the clients accept (a bytes window of the server's max_bytes_window fits)."""

DEFAULT_CONNECTIONS = 4
"""The most HTTP/2 connections a client holds unless told: enough to reach a small host's workers."""

BATCHED_BYTES = 64 * 1024
"""The async client sends payloads up to this size given whole through shared OffloadBatch calls."""


def _channel_target(target: str) -> tuple[str, bool]:
    """Split `http://`/`https://` off a target; returns (host:port, tls)."""
    for scheme, tls in (("https://", True), ("http://", False)):
        if target.startswith(scheme):
            return target[len(scheme) :].rstrip("/"), tls
    return target, False


def _channel_args(
    target: str, credentials: grpc.ChannelCredentials | None
) -> tuple[str, grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
    address, tls = _channel_target(target)
    if credentials is None and tls:
        credentials = grpc.ssl_channel_credentials()
    return address, credentials, [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES), *RECONNECT_OPTIONS]


def _connection_count(connections: int) -> int:
    if isinstance(connections, bool) or not isinstance(connections, int) or not 1 <= connections <= 64:
        raise ValueError(f"connections must be a whole number from 1 to 64, got {connections!r}")
    return connections


def _own_connections(options: list[tuple[str, Any]], count: int) -> list[tuple[str, Any]]:
    # grpc lets channels with the same arguments share one connection; several must each keep
    # their own to reach several workers of a server.
    return [*options, ("grpc.use_local_subchannel_pool", 1)] if count > 1 else options


def _metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token is not None else ()


class _StreamSource:
    """_StreamSource is a caller's byte stream that one attempt of an offload may read.

    A stream read by a failed attempt may have lost pieces to it and cannot be sent again, so
    the first attempt that reads it claims it; the offload is retried only while no attempt has
    (a failure before the first piece was asked for), and an attempt that finds the stream
    claimed by another fails rather than send what is left of it.
    """

    def __init__(self, data: Any) -> None:
        self.data = data
        self.failure: Exception | None = None
        """What the caller's stream raised while an attempt read it: the offload's outcome."""
        self._claimed = False
        self._lock = threading.Lock()

    def claim(self) -> None:
        """claim is called once by each attempt before it reads the stream; only the first may."""
        with self._lock:
            if self._claimed:
                raise RuntimeError("the offload's stream was read by an earlier attempt and cannot be sent again")
            self._claimed = True

    def replayable(self) -> bool:
        """replayable tells whether no attempt has read the stream yet."""
        return not self._claimed


def _stream_requests(first: pb.OffloadRequest, source: _StreamSource) -> Iterator[pb.OffloadRequest]:
    yield first
    source.claim()
    try:
        for piece in source.data:
            yield from msg.chunk_requests(msg.byte_view(piece))
    except Exception as err:
        # Raised on into grpc, which cancels the call (nothing is committed) and reports only
        # UNKNOWN "Exception iterating requests!": the attempt raises this instead.
        source.failure = err
        raise


async def _async_stream_requests(first: pb.OffloadRequest, source: _StreamSource) -> AsyncIterator[pb.OffloadRequest]:
    yield first
    source.claim()
    data = source.data
    try:
        if hasattr(data, "__aiter__"):
            async for piece in data:
                for req in msg.chunk_requests(msg.byte_view(piece)):
                    yield req
        else:
            for piece in data:
                for req in msg.chunk_requests(msg.byte_view(piece)):
                    yield req
    except Exception as err:
        # grpc.aio cancels the call (nothing is committed) and raises CancelledError in the
        # caller's task: the attempt raises this instead.
        source.failure = err
        raise


def _cancelled_by_caller() -> bool:
    """Whether the running task is being cancelled (by its caller, a TaskGroup, a timeout)
    rather than seeing grpc.aio's CancelledError for a call it cancelled itself."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    # Python 3.10 has no Task.cancelling(): every CancelledError is taken as the caller's there.
    return task is None or cancelling is None or cancelling() > 0


class SpillwayClient:
    """SpillwayClient talks to a Spillway server over gRPC, blocking.

    `target` is `host:port` (plaintext h2c), `http://host:port` or `https://host:port` (TLS with
    the system roots, or `credentials`). `token` is sent as a bearer token on every call; omit
    it for a dev-mode server. Every method takes `timeout=` (seconds) as the call's deadline,
    retries included. Errors are `grpc.RpcError` with the server's status code; `error_reason`
    reads the reason. Offloads, reads and `stat` are idempotent and repeat a transient failure
    (`is_transient_error`) under `retry` (default `RetryPolicy()`: 3 attempts, 0.1 s base
    backoff with full jitter, 2 s cap), the policy docs/operations.md#retries describes for every SDK; the
    other calls are never repeated. `interceptors` are grpc client interceptors every call
    (each attempt of a retried one) passes through. `connections` (1 to 64, default 4) is the
    most HTTP/2 connections the client holds: each call (and each attempt of a retried one)
    starts on the one with the fewest calls open, and a connection opens with its first call, so
    a client making one call at a time holds one. `spillway serve` runs a worker a core and
    gives each connection to one worker, so calls at once reach several.
    """

    def __init__(
        self,
        target: str,
        token: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        retry: RetryPolicy | None = None,
        interceptors: Sequence[Any] = (),
        connections: int = DEFAULT_CONNECTIONS,
    ) -> None:
        address, creds, options = _channel_args(target, credentials)
        count = _connection_count(connections)
        # Each window's stream is read on the calling thread: by default grpc starts a thread
        # per server-streaming call to wait on its messages, which cost a 100-line window
        # about as much as the server's work on it.
        options.append((grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1))
        options = _own_connections(options, count)
        self._retry = retry if retry is not None else RetryPolicy()
        self._channels = [
            grpc.secure_channel(address, creds, options=options)
            if creds is not None
            else grpc.insecure_channel(address, options=options)
            for _ in range(count)
        ]
        self._metadata = _metadata(token)
        # Each attempt of a retried call passes through the interceptors (grpc client interceptors).
        stubs = [
            pb_grpc.SpillwayServiceStub(grpc.intercept_channel(channel, *interceptors) if interceptors else channel)
            for channel in self._channels
        ]
        self.raw = stubs[0]
        """The generated stub on the first connection, for calls the SDK does not wrap."""
        self._spread = spread_stub(stubs) if count > 1 else None

    def _stub(self) -> pb_grpc.SpillwayServiceStub:
        # With one connection every call goes through `raw`, as it always has.
        return self.raw if self._spread is None else self._spread

    def close(self) -> None:
        """close releases the connections."""
        for channel in self._channels:
            channel.close()

    def __enter__(self) -> SpillwayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def offload(
        self, key: msg.KeyLike, data: Any, *, timeout: float | None = None, **options: Any
    ) -> types_pb.ResultAttachment:
        """offload stores `data` under `key` and returns the committed record.

        `data` is bytes, str (UTF-8), an iterator of bytes (streamed as it comes) or any other
        JSON-able value (sent as compact JSON). `key` may carry `attempt` (absent, 0 or 1: the
        call's first attempt; 2 to 1000: a retry, committed as its own output under
        `res@<n>_<call_id>`), and `attempt=` among the options replaces it. `options` are
        OffloadHeader fields (`slot`, `name`, `content_type`, `expected_size`,
        `expected_sha256`, `observed_bytes`, `truncated`, `ttl`, `preview`, `preview_only`); a payload given whole is sent with its
        `expected_size`, so one over the server's max_blob_bytes is refused (RESOURCE_EXHAUSTED)
        before its bytes are sent, and streamed in 1 MiB chunks cut as they are sent: bytes, a
        bytearray or a memoryview are never copied whole. A transient failure (a draining or
        lost replica) is retried under the client's policy; Offload is idempotent per key, so a
        retry of a committed offload returns the same record. An iterator cannot be replayed:
        once an attempt started reading it, that attempt's failure is final.
        """
        if msg.is_stream(data):
            first = msg.header(key, options, json_value=False)
            source = _StreamSource(data)
            return with_retries(
                self._retry,
                timeout,
                lambda left: self._offload_once(_stream_requests(first, source), left, source),
                source.replayable,
            )
        payload, json_value = msg.payload_bytes(data)
        # The size is announced, so a payload over the server's limit is refused before it is sent.
        first = msg.header(key, {"expected_size": len(payload), **options}, json_value=json_value)
        return with_retries(
            self._retry, timeout, lambda left: self._offload_once(msg.offload_requests(first, payload), left)
        )

    def _offload_once(
        self, requests: Iterator[pb.OffloadRequest], timeout: float | None, source: _StreamSource | None = None
    ) -> types_pb.ResultAttachment:
        try:
            res: pb.OffloadResponse = self._stub().Offload(requests, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError:
            if source is not None and source.failure is not None:
                raise source.failure from None
            raise
        return res.attachment

    def offload_batch(
        self, items: Iterable[msg.BatchItemLike], *, timeout: float | None = None
    ) -> list[types_pb.ResultAttachment | BatchItemError]:
        """offload_batch commits several small outputs in one OffloadBatch call.

        `items` are `(key, data)` or `(key, data, options)` with whole data (bytes, str or a JSON
        value) and the options `offload` takes; at most 1,000, bounded together by the server's
        largest message (max_chunk_bytes + 64 KiB). Each item is committed exactly as its own
        `offload` would be, and the result at its index is its record or a `BatchItemError`
        (its own status; nothing of it committed). The call raises `grpc.RpcError` only when
        the batch as a whole is refused; a transient failure is retried like `offload`'s. Items
        whose answers did not fit the server's reply (4 MiB; it answers them ABORTED) are sent
        again in further OffloadBatch calls for as long as each commits some of them.
        """
        req = msg.batch_request(items)

        def send(batch: pb.OffloadBatchRequest) -> list[msg.Outcome]:
            res = with_retries(
                self._retry,
                timeout,
                lambda left: self._stub().OffloadBatch(batch, timeout=left, metadata=self._metadata),
            )
            return msg.batch_outcomes(res, len(batch.items))

        outcomes = send(req)
        again = msg.refused_for_room(outcomes)
        while again:
            again = msg.take_resent(outcomes, again, send(msg.resend_request(req, again)))
        return outcomes

    def read_tool_output(
        self,
        run_id: str,
        handle: str,
        *,
        lines: msg.WindowLike | None = None,
        bytes: msg.WindowLike | None = None,
        search: msg.WindowLike | None = None,
        json: msg.WindowLike | None = None,
        json_path: msg.WindowLike | None = None,
        omit_rendered: bool = False,
        keep_ansi: bool = False,
        rendered_only: bool = False,
        timeout: float | None = None,
    ) -> Window:
        """read_tool_output reads one window of the output behind `handle` and collects it.

        Give at most one window, as a message or a mapping of its fields, e.g.
        `lines={"offset": 10, "limit": 5}`, `bytes={"offset": 0, "limit": 4096}`,
        `search={"pattern": "ERROR", "context_lines": 1}`, `json={"offset": 0, "limit": 100}` (lines of
        the JSON view: the output pretty-printed, or one record per line for JSON Lines),
        `json_path={"query": "$.items[?@.status == 'failed'].id", "max_matches": 20}` (an RFC 9535
        JSONPath query: the matched nodes' paths and values); none reads lines from the start. A
        window read is idempotent: a transient failure is retried from the window's start.
        Terminal escape sequences are removed from the model-facing text (rendered, line and
        match texts) unless `keep_ansi`; bytes-mode data is the stored bytes either way.
        `rendered_only` asks for the header and the trailer alone, no content frames: the same
        rendered text in about half the bytes, for callers that show nothing else (the model tool).
        """
        req = msg.read_request(
            run_id,
            handle,
            lines=lines,
            bytes_=bytes,
            search=search,
            json_=json,
            json_path=json_path,
            omit_rendered=omit_rendered,
            keep_ansi=keep_ansi,
            rendered_only=rendered_only,
        )
        return with_retries(
            self._retry,
            timeout,
            lambda left: collect(list(self._stub().ReadToolOutput(req, timeout=left, metadata=self._metadata))),
        )

    def read_bytes(
        self,
        run_id: str,
        handle: str,
        *,
        offset: int = 0,
        length: int | None = None,
        timeout: float | None = None,
        verify: bool = False,
    ) -> Iterator[bytes]:
        """read_bytes yields the payload's bytes from `offset`, `length` of them (all by default).

        Bytes-mode windows without the rendered text, one after another when the server's
        max_bytes_window ends one early. A transient failure resumes at the first byte not yet
        yielded, under the client's retry policy (attempts count afresh once bytes arrive), so no
        byte is yielded twice; `timeout` (seconds) bounds the whole read. With `verify` (whole payload only) the
        bytes are checked against the record's size and sha256 as they pass: a mismatch raises
        DataLossError (DATA_LOSS) after the last byte, in place of a clean end.
        """
        read = ByteRead(run_id, handle, offset, length, RetryBudget(self._retry, timeout), verify)
        if verify:
            record = self.stat(run_id, handle, timeout=read.timeout())
            read.expect(record.size_bytes, record.sha256)
        while read.more():
            call = self._stub().ReadToolOutput(read.request(), timeout=read.timeout(), metadata=self._metadata)
            try:
                for frame in call:
                    data = read.take(frame)
                    if data is not None:
                        yield data
            except grpc.RpcError as err:
                time.sleep(read.backoff(err))
                continue
            finally:
                # A caller that stops early must not leave the stream running.
                call.cancel()
            if read.window_done():
                return

    def stat(self, run_id: str, handle: str, *, timeout: float | None = None) -> types_pb.ResultAttachment:
        """stat returns the record behind `handle` in run `run_id`; a transient failure is retried."""
        req = pb.StatToolOutputRequest(run_id=run_id, handle=handle)
        res = with_retries(
            self._retry, timeout, lambda left: self._stub().StatToolOutput(req, timeout=left, metadata=self._metadata)
        )
        return res.attachment

    def list(
        self, run_id: str, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> pb.ListToolOutputsResponse:
        """list returns one page of a run's records, by escaped handle, a call's attempts together."""
        req = pb.ListToolOutputsRequest(run_id=run_id, page_size=page_size, page_token=page_token)
        return self._stub().ListToolOutputs(req, timeout=timeout, metadata=self._metadata)

    def list_all(
        self, run_id: str, *, page_size: int = 0, timeout: float | None = None
    ) -> Iterator[types_pb.ResultAttachment]:
        """list_all yields every record of a run, fetching pages as it goes (`timeout` is per page)."""
        token = ""
        while True:
            page = self.list(run_id, page_size=page_size, page_token=token, timeout=timeout)
            yield from page.attachments
            token = page.next_page_token
            if not token:
                return

    def list_runs(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> pb.ListRunsResponse:
        """list_runs returns one page of the calling tenant's runs (expired and deleted runs are not listed).

        Each run carries its live outputs' count and bytes, times, expiry and fork parent, in the
        server's stored order. A page may hold fewer than `page_size` runs and still have a next
        page; a token of another tenant or an edited one is INVALID_ARGUMENT.
        """
        req = pb.ListRunsRequest(page_size=page_size, page_token=page_token)
        return self._stub().ListRuns(req, timeout=timeout, metadata=self._metadata)

    def list_all_runs(self, *, page_size: int = 0, timeout: float | None = None) -> Iterator[pb.RunInfo]:
        """list_all_runs yields every run of the calling tenant, fetching pages as it goes (`timeout` is per page)."""
        token = ""
        while True:
            page = self.list_runs(page_size=page_size, page_token=token, timeout=timeout)
            yield from page.runs
            token = page.next_page_token
            if not token:
                return

    def delete_run(self, run_id: str, *, timeout: float | None = None) -> int:
        """delete_run removes a run's registry and bytes; returns how many records were removed."""
        req = pb.DeleteRunRequest(run_id=run_id)
        return self._stub().DeleteRun(req, timeout=timeout, metadata=self._metadata).deleted_attachments

    def fork_run(
        self, parent_run_id: str, child_run_id: str, *, ttl: msg.TtlLike | None = None, timeout: float | None = None
    ) -> int:
        """fork_run creates `child_run_id` seeing the parent's handles; returns how many it received."""
        req = pb.ForkRunRequest(parent_run_id=parent_run_id, child_run_id=child_run_id)
        if ttl is not None:
            req.ttl.CopyFrom(msg.to_duration(ttl))
        return self._stub().ForkRun(req, timeout=timeout, metadata=self._metadata).forked_attachments

    def merge_run(self, child_run_id: str, parent_run_id: str, *, timeout: float | None = None) -> pb.MergeRunResponse:
        """merge_run brings the outputs forked run `child_run_id` created into `parent_run_id`, its
        fork parent, under the same handles, all or nothing; the response counts merged and
        unchanged outputs. ALREADY_EXISTS (naming the handle) when the parent holds one of them
        with other bytes, FAILED_PRECONDITION when the parent is not the child's fork parent,
        NOT_FOUND for a missing child. Repeating it changes nothing (all unchanged)."""
        req = pb.MergeRunRequest(child_run_id=child_run_id, parent_run_id=parent_run_id)
        return self._stub().MergeRun(req, timeout=timeout, metadata=self._metadata)

    def set_run_ttl(self, run_id: str, ttl: msg.TtlLike, *, timeout: float | None = None) -> pb.SetRunTtlResponse:
        """set_run_ttl makes the whole run expire `ttl` from now; the response holds the expiry time."""
        req = pb.SetRunTtlRequest(run_id=run_id, ttl=msg.to_duration(ttl))
        return self._stub().SetRunTtl(req, timeout=timeout, metadata=self._metadata)

    def server_info(self, *, timeout: float | None = None) -> pb.GetServerInfoResponse:
        """server_info returns the server's version, backend, limits, window caps and features."""
        return self._stub().GetServerInfo(pb.GetServerInfoRequest(), timeout=timeout, metadata=self._metadata)


_Call = TypeVar("_Call", bound=Callable[..., Awaitable[Any]])
_Stream = TypeVar("_Stream", bound=Callable[..., AsyncIterator[Any]])


def _cancelled_when_closed(method: _Call) -> _Call:
    """An AsyncSpillwayClient call that close() cancels ends CANCELLED (a StatusError): grpc.aio
    raises asyncio.CancelledError in the caller's task, which a TaskGroup takes for its own."""

    @functools.wraps(method)
    async def call(self: AsyncSpillwayClient, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except asyncio.CancelledError:
            if self._closed and not _cancelled_by_caller():
                raise closed_client_error() from None
            raise

    return cast("_Call", call)


def _stream_cancelled_when_closed(method: _Stream) -> _Stream:
    """_cancelled_when_closed for the async iterators (read_bytes, list_all, list_all_runs)."""

    @functools.wraps(method)
    async def stream(self: AsyncSpillwayClient, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        try:
            async for item in method(self, *args, **kwargs):
                yield item
        except asyncio.CancelledError:
            if self._closed and not _cancelled_by_caller():
                raise closed_client_error() from None
            raise

    return cast("_Stream", stream)


_aio_process: int | None = None
"""The process whose AsyncSpillwayClient started grpc.aio; a fork's child inherits it."""


def _refuse_aio_after_fork() -> None:
    global _aio_process
    pid = os.getpid()
    if _aio_process is not None and _aio_process != pid:
        raise RuntimeError(
            f"AsyncSpillwayClient cannot run in a process fork()ed from one that used it (pid {_aio_process}): "
            "grpc.aio's poller does not survive a fork, and the child crashes or hangs; start the child with "
            "multiprocessing's 'spawn' or 'forkserver' method, or use SpillwayClient in it"
        )
    _aio_process = pid


class AsyncSpillwayClient:
    """AsyncSpillwayClient is SpillwayClient on grpc.aio: the same methods, awaited.

    `offload` also accepts an async iterator of bytes, and `list_all` is an async iterator.
    Create and use it inside one running event loop. Retries as SpillwayClient's, and
    `connections` spreads calls over up to that many HTTP/2 connections, as SpillwayClient's does.
    """

    def __init__(
        self,
        target: str,
        token: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        retry: RetryPolicy | None = None,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        connections: int = DEFAULT_CONNECTIONS,
    ) -> None:
        _refuse_aio_after_fork()
        address, creds, options = _channel_args(target, credentials)
        count = _connection_count(connections)
        options = _own_connections(options, count)
        self._retry = retry if retry is not None else RetryPolicy()
        self._channels = [
            grpc.aio.secure_channel(address, creds, options=options, interceptors=interceptors or None)
            if creds is not None
            else grpc.aio.insecure_channel(address, options=options, interceptors=interceptors or None)
            for _ in range(count)
        ]
        self._metadata = _metadata(token)
        stubs = [pb_grpc.SpillwayServiceStub(channel) for channel in self._channels]
        self.raw = stubs[0]
        """The generated stub on the first aio connection, for calls the SDK does not wrap."""
        self._spread = spread_async_stub(stubs) if count > 1 else None
        self._closed = False
        self._batcher = AsyncOffloadBatcher(self._send_batch, self._send_alone)

    def _stub(self) -> pb_grpc.SpillwayServiceStub:
        return self.raw if self._spread is None else self._spread

    async def close(self) -> None:
        """close releases the connections; calls still in flight end CANCELLED."""
        self._closed = True
        for channel in self._channels:
            await channel.close()

    async def __aenter__(self) -> AsyncSpillwayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def offload(
        self, key: msg.KeyLike, data: Any, *, timeout: float | None = None, **options: Any
    ) -> types_pb.ResultAttachment:
        """offload stores `data` under `key` and returns the committed record (see SpillwayClient.offload).

        A payload of at most 64 KiB given whole shares an OffloadBatch call with the offloads
        started beside it on the event loop (see AsyncOffloadBatcher); it settles the same way.
        """
        if msg.is_stream(data):
            first = msg.header(key, options, json_value=False)
            source = _StreamSource(data)
            return await with_retries_async(
                self._retry,
                timeout,
                lambda left: self._offload_once(_async_stream_requests(first, source), left, source),
                source.replayable,
            )
        payload, json_value = msg.payload_bytes(data)
        if len(payload) <= BATCHED_BYTES:
            first = msg.header(key, options, json_value=json_value)
            return await self._batcher.offload(first.header, bytes(payload), timeout)
        # Streamed alone, it announces its size, so one over the server's limit is refused first.
        announced = msg.header(key, {"expected_size": len(payload), **options}, json_value=json_value)
        return await self._send_alone(announced.header, payload, timeout)

    async def _send_alone(
        self, header: pb.OffloadHeader, payload: msg.Payload, timeout: float | None
    ) -> types_pb.ResultAttachment:
        first = pb.OffloadRequest(header=header)
        return await with_retries_async(
            self._retry, timeout, lambda left: self._offload_once(msg.offload_requests(first, payload), left)
        )

    async def _send_batch(self, req: pb.OffloadBatchRequest, timeout: float | None) -> pb.OffloadBatchResponse:
        return await with_retries_async(
            self._retry, timeout, lambda left: self._stub().OffloadBatch(req, timeout=left, metadata=self._metadata)
        )

    async def _offload_once(
        self, requests: Any, timeout: float | None, source: _StreamSource | None = None
    ) -> types_pb.ResultAttachment:
        try:
            res: pb.OffloadResponse = await self._stub().Offload(requests, timeout=timeout, metadata=self._metadata)
        except asyncio.CancelledError:
            if source is not None and source.failure is not None:
                raise source.failure from None
            if _cancelled_by_caller():
                raise
            if self._closed:
                raise closed_client_error() from None
            # grpc.aio cancels an upload itself when its connection fails as the request is
            # closed (SendCloseFromClientOperation): transient, like any lost connection.
            raise StatusError(
                grpc.StatusCode.UNAVAILABLE, "the connection failed while the offload's request was being sent"
            ) from None
        return res.attachment

    @_cancelled_when_closed
    async def offload_batch(
        self, items: Iterable[msg.BatchItemLike], *, timeout: float | None = None
    ) -> list[types_pb.ResultAttachment | BatchItemError]:
        """offload_batch commits several small outputs in one call (see SpillwayClient.offload_batch)."""
        req = msg.batch_request(items)

        async def send(batch: pb.OffloadBatchRequest) -> list[msg.Outcome]:
            return msg.batch_outcomes(await self._send_batch(batch, timeout), len(batch.items))

        outcomes = await send(req)
        again = msg.refused_for_room(outcomes)
        while again:
            again = msg.take_resent(outcomes, again, await send(msg.resend_request(req, again)))
        return outcomes

    @_cancelled_when_closed
    async def read_tool_output(
        self,
        run_id: str,
        handle: str,
        *,
        lines: msg.WindowLike | None = None,
        bytes: msg.WindowLike | None = None,
        search: msg.WindowLike | None = None,
        json: msg.WindowLike | None = None,
        json_path: msg.WindowLike | None = None,
        omit_rendered: bool = False,
        keep_ansi: bool = False,
        rendered_only: bool = False,
        timeout: float | None = None,
    ) -> Window:
        """read_tool_output reads one window and collects it (see SpillwayClient.read_tool_output)."""
        req = msg.read_request(
            run_id,
            handle,
            lines=lines,
            bytes_=bytes,
            search=search,
            json_=json,
            json_path=json_path,
            omit_rendered=omit_rendered,
            keep_ansi=keep_ansi,
            rendered_only=rendered_only,
        )

        async def attempt(left: float | None) -> Window:
            call = self._stub().ReadToolOutput(req, timeout=left, metadata=self._metadata)
            return collect([frame async for frame in call])

        return await with_retries_async(self._retry, timeout, attempt)

    @_stream_cancelled_when_closed
    async def read_bytes(
        self,
        run_id: str,
        handle: str,
        *,
        offset: int = 0,
        length: int | None = None,
        timeout: float | None = None,
        verify: bool = False,
    ) -> AsyncIterator[bytes]:
        """read_bytes yields the payload's bytes in a range (see SpillwayClient.read_bytes)."""
        read = ByteRead(run_id, handle, offset, length, RetryBudget(self._retry, timeout), verify)
        if verify:
            record = await self.stat(run_id, handle, timeout=read.timeout())
            read.expect(record.size_bytes, record.sha256)
        while read.more():
            call = self._stub().ReadToolOutput(read.request(), timeout=read.timeout(), metadata=self._metadata)
            try:
                async for frame in call:
                    data = read.take(frame)
                    if data is not None:
                        yield data
            except grpc.RpcError as err:
                await asyncio.sleep(read.backoff(err))
                continue
            finally:
                call.cancel()
            if read.window_done():
                return

    @_cancelled_when_closed
    async def stat(self, run_id: str, handle: str, *, timeout: float | None = None) -> types_pb.ResultAttachment:
        """stat returns the record behind `handle` in run `run_id`; a transient failure is retried."""
        req = pb.StatToolOutputRequest(run_id=run_id, handle=handle)
        res = await with_retries_async(
            self._retry, timeout, lambda left: self._stub().StatToolOutput(req, timeout=left, metadata=self._metadata)
        )
        return res.attachment

    @_cancelled_when_closed
    async def list(
        self, run_id: str, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> pb.ListToolOutputsResponse:
        """list returns one page of a run's records, by escaped handle, a call's attempts together."""
        req = pb.ListToolOutputsRequest(run_id=run_id, page_size=page_size, page_token=page_token)
        return await self._stub().ListToolOutputs(req, timeout=timeout, metadata=self._metadata)

    @_stream_cancelled_when_closed
    async def list_all(
        self, run_id: str, *, page_size: int = 0, timeout: float | None = None
    ) -> AsyncIterator[types_pb.ResultAttachment]:
        """list_all yields every record of a run, fetching pages as it goes (`timeout` is per page)."""
        token = ""
        while True:
            page = await self.list(run_id, page_size=page_size, page_token=token, timeout=timeout)
            for attachment in page.attachments:
                yield attachment
            token = page.next_page_token
            if not token:
                return

    @_cancelled_when_closed
    async def list_runs(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> pb.ListRunsResponse:
        """list_runs returns one page of the calling tenant's runs (expired and deleted runs are not listed).

        Each run carries its live outputs' count and bytes, times, expiry and fork parent, in the
        server's stored order. A page may hold fewer than `page_size` runs and still have a next
        page; a token of another tenant or an edited one is INVALID_ARGUMENT.
        """
        req = pb.ListRunsRequest(page_size=page_size, page_token=page_token)
        return await self._stub().ListRuns(req, timeout=timeout, metadata=self._metadata)

    @_stream_cancelled_when_closed
    async def list_all_runs(self, *, page_size: int = 0, timeout: float | None = None) -> AsyncIterator[pb.RunInfo]:
        """list_all_runs yields every run of the calling tenant, fetching pages as it goes (`timeout` is per page)."""
        token = ""
        while True:
            page = await self.list_runs(page_size=page_size, page_token=token, timeout=timeout)
            for run in page.runs:
                yield run
            token = page.next_page_token
            if not token:
                return

    @_cancelled_when_closed
    async def delete_run(self, run_id: str, *, timeout: float | None = None) -> int:
        """delete_run removes a run's registry and bytes; returns how many records were removed."""
        req = pb.DeleteRunRequest(run_id=run_id)
        return (await self._stub().DeleteRun(req, timeout=timeout, metadata=self._metadata)).deleted_attachments

    @_cancelled_when_closed
    async def fork_run(
        self, parent_run_id: str, child_run_id: str, *, ttl: msg.TtlLike | None = None, timeout: float | None = None
    ) -> int:
        """fork_run creates `child_run_id` seeing the parent's handles; returns how many it received."""
        req = pb.ForkRunRequest(parent_run_id=parent_run_id, child_run_id=child_run_id)
        if ttl is not None:
            req.ttl.CopyFrom(msg.to_duration(ttl))
        return (await self._stub().ForkRun(req, timeout=timeout, metadata=self._metadata)).forked_attachments

    @_cancelled_when_closed
    async def merge_run(
        self, child_run_id: str, parent_run_id: str, *, timeout: float | None = None
    ) -> pb.MergeRunResponse:
        """merge_run is SpillwayClient.merge_run, awaited."""
        req = pb.MergeRunRequest(child_run_id=child_run_id, parent_run_id=parent_run_id)
        return await self._stub().MergeRun(req, timeout=timeout, metadata=self._metadata)

    @_cancelled_when_closed
    async def set_run_ttl(self, run_id: str, ttl: msg.TtlLike, *, timeout: float | None = None) -> pb.SetRunTtlResponse:
        """set_run_ttl makes the whole run expire `ttl` from now; the response holds the expiry time."""
        req = pb.SetRunTtlRequest(run_id=run_id, ttl=msg.to_duration(ttl))
        return await self._stub().SetRunTtl(req, timeout=timeout, metadata=self._metadata)

    @_cancelled_when_closed
    async def server_info(self, *, timeout: float | None = None) -> pb.GetServerInfoResponse:
        """server_info returns the server's version, backend, limits, window caps and features."""
        return await self._stub().GetServerInfo(pb.GetServerInfoRequest(), timeout=timeout, metadata=self._metadata)

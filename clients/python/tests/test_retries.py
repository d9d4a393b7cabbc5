"""The retry policy of docs/operations.md#retries, against real failures: a replica behind a real nginx is
killed with SIGKILL while calls are in flight, and restarted on the same port and data dir."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from conftest import spillway_process
from nginx_proxy import free_port, nginx
from spillway_client import AsyncSpillwayClient, RetryPolicy, SpillwayClient, is_transient_error
from spillway_client.errors import StatusError
from spillway_client.retry import RetryBudget, with_retries

PAYLOAD = os.urandom(64 * 1024 * 1024)
"""Large enough that a read is still streaming when the replica behind it dies."""
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()
PATIENT = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.5)
RESET = "Received RST_STREAM with error code 2"


class Replica:
    """One `spillway serve --backend filesystem` that can be killed and restarted in place."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = ""
        self._stack = contextlib.ExitStack()
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        # One process, so that SIGKILL is the replica's death: the workers of a `spillway serve`
        # whose first process is killed drain, as docs/operations.md says, and finish the call.
        flags = ("--data-dir", str(self.data_dir), "--workers", "1")
        self.url, self._proc = self._stack.enter_context(spillway_process(*flags, backend="filesystem", port=self.port))

    def kill(self) -> None:
        """SIGKILL: no drain, no goodbye; calls in flight through nginx are cut."""
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait()

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self._stack.close()


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[Replica, str]]:
    """A replica and the URL of a real nginx in front of it (the docs/operations.md config)."""
    replica = Replica(tmp_path / "store")
    replica.start()
    try:
        with nginx([f"127.0.0.1:{replica.port}"]) as url:
            yield replica, url
    finally:
        replica.close()


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


def stored(replica: Replica, run_id: str) -> str:
    """Offloads PAYLOAD straight to the replica; returns its handle."""
    with SpillwayClient(replica.url) as direct:
        att = direct.offload(key(run_id, "big"), PAYLOAD)
    assert att.sha256 == DIGEST
    return att.handle


class Calls(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
):
    """Counts the attempts of each method and runs a test's hooks at points of the first
    attempt of a method: `request` (a client stream: before its n-th message), `first_response`
    (a server stream: when its first message arrived), `after` (a unary answer: once the call
    failed or answered, before the SDK sees the outcome)."""

    def __init__(self) -> None:
        self.attempts: collections.Counter[str] = collections.Counter()
        self.after: dict[str, Callable[[], None]] = {}
        self.first_response: dict[str, Callable[[], None]] = {}
        self.request: dict[str, tuple[int, Callable[[], None]]] = {}

    def _first(self, hooks: dict[str, Any], details: grpc.ClientCallDetails) -> Any:
        name = details.method.rsplit("/", 1)[-1]
        return hooks.pop(name, None) if self.attempts[name] == 1 else None

    def _count(self, details: grpc.ClientCallDetails) -> None:
        self.attempts[details.method.rsplit("/", 1)[-1]] += 1

    def _then(self, details: grpc.ClientCallDetails, outcome: Any) -> Any:
        hook = self._first(self.after, details)
        if hook is not None:
            outcome.exception()
            hook()
        return outcome

    def intercept_unary_unary(self, continuation, client_call_details, request):
        self._count(client_call_details)
        return self._then(client_call_details, continuation(client_call_details, request))

    def intercept_unary_stream(self, continuation, client_call_details, request):
        self._count(client_call_details)
        hook = self._first(self.first_response, client_call_details)
        call = continuation(client_call_details, request)
        return call if hook is None else _FirstResponseHook(call, hook)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        self._count(client_call_details)
        hook = self._first(self.request, client_call_details)
        requests = request_iterator if hook is None else _before_message(request_iterator, *hook)
        return self._then(client_call_details, continuation(client_call_details, requests))


class _FirstResponseHook:
    """A response stream that runs hook once its first message arrived (the rest of the call
    object is the original's)."""

    def __init__(self, call: Any, hook: Callable[[], None]) -> None:
        self._call = call
        self._hook: Callable[[], None] | None = hook

    def __iter__(self) -> _FirstResponseHook:
        return self

    def __next__(self) -> Any:
        if self._hook is not None:
            first = next(self._call)
            hook, self._hook = self._hook, None
            hook()
            return first
        return next(self._call)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def _before_message(requests: Iterator[Any], n: int, hook: Callable[[], None]) -> Iterator[Any]:
    for i, request in enumerate(requests):
        if i == n:
            hook()
        yield request


class AsyncCalls:
    """Calls for the async client's streams: counts attempts, runs `first_response`, and
    `request` then `after` on a client stream. grpc.aio files an interceptor under one kind of
    call only, so `interceptors` are two, sharing this state."""

    def __init__(self) -> None:
        self.attempts: collections.Counter[str] = collections.Counter()
        self.first_response: dict[str, Callable[[], None]] = {}
        self.request: dict[str, tuple[int, Callable[[], None]]] = {}
        self.after: dict[str, Callable[[], None]] = {}
        self.failures: list[grpc.RpcError] = []
        """How the hooked client streams failed."""
        self.interceptors: list[grpc.aio.ClientInterceptor] = [_AsyncServerStreams(self), _AsyncClientStreams(self)]

    def first_attempt(self, details: grpc.aio.ClientCallDetails) -> str | None:
        """Counts an attempt; returns the method's name on its first attempt, else None."""
        name = details.method.decode().rsplit("/", 1)[-1]
        self.attempts[name] += 1
        return name if self.attempts[name] == 1 else None


class _AsyncClientStreams(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, calls: AsyncCalls) -> None:
        self.calls = calls

    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        name = self.calls.first_attempt(client_call_details)
        hook = self.calls.request.pop(name, None) if name else None
        after = self.calls.after.pop(name, None) if name else None
        if hook is None:
            return await continuation(client_call_details, request_iterator)
        n, run = hook

        async def requests():
            # The SDK hands grpc.aio a plain iterator of its chunk messages.
            for i, request in enumerate(request_iterator):
                if i == n:
                    run()
                yield request

        call = await continuation(client_call_details, requests())
        try:
            await call
        except grpc.RpcError as err:
            self.calls.failures.append(err)
        if after is not None:
            after()
        return call


class _AsyncServerStreams(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, calls: AsyncCalls) -> None:
        self.calls = calls

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        name = self.calls.first_attempt(client_call_details)
        call = await continuation(client_call_details, request)
        hook = self.calls.first_response.pop(name, None) if name else None
        if hook is None:
            return call

        async def responses():
            first = True
            async for response in call:
                yield response
                if first:
                    first = False
                    # Restarting a replica takes a second; the event loop may block for it here.
                    hook()

        return responses()


# --- the classification: each mapping, and its input taken from a real failure below ---


@pytest.mark.parametrize(
    ("code", "details", "transient"),
    [
        (grpc.StatusCode.UNAVAILABLE, "Received http2 header with status: 502", True),
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", True),
        (grpc.StatusCode.UNAVAILABLE, "server is draining", True),
        (grpc.StatusCode.INTERNAL, f"Stream removed (RST_STREAM ({RESET}))", True),
        # grpc.aio, 1 run in 7 of the async mid-upload kill below: nginx's 502 raced the upload.
        (
            grpc.StatusCode.INTERNAL,
            (
                "Error in HTTP transport completing operation: on_write_finished_cb write_state=WRITING+MORE "
                "refs=0 flags=1 peer_address=ipv4:127.0.0.1:21785 (Pending writes failed due to stream closure "
                "(Data frame with END_STREAM flag received) (RST_STREAM (Received RST_STREAM with error code 0)))"
            ),
            True,
        ),
        (grpc.StatusCode.INTERNAL, "Stream removed (RST_STREAM (Received RST_STREAM with error code 0))", False),
        (grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 8", False),
        (grpc.StatusCode.INTERNAL, "store answered an unexpected status", False),
        (grpc.StatusCode.INTERNAL, "", False),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", False),
        (grpc.StatusCode.CANCELLED, "Cancelled", False),
        (grpc.StatusCode.UNKNOWN, f"Stream removed (RST_STREAM ({RESET}))", False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many calls", False),
        (grpc.StatusCode.PERMISSION_DENIED, "invalid_deferred_handle", False),
        (grpc.StatusCode.ALREADY_EXISTS, "run exists", False),
        (grpc.StatusCode.DATA_LOSS, "sha256 mismatch", False),
    ],
)
def test_is_transient_error_maps_each_status(code: grpc.StatusCode, details: str, transient: bool) -> None:
    assert is_transient_error(StatusError(code, details)) is transient


@pytest.mark.parametrize(
    ("details", "debug", "transient"),
    [
        # grpc.aio, in CI once, the async mid-upload kill below: the write of the upload's next
        # message failed and grpc.aio marked the call INTERNAL itself.
        (
            "Internal error from Core",
            'Failed "execute_batch": (<grpc._cython.cygrpc.SendMessageOperation object at 0x7f8e786a4ab0>,)',
            True,
        ),
        ("Internal error from Core", 'Failed "execute_batch": (<grpc._cython.cygrpc.ReceiveMessageOperation>,)', False),
        ("Internal error from Core", None, False),
        ("store answered an unexpected status", "SendMessageOperation", False),
    ],
)
def test_is_transient_error_maps_a_write_grpc_aio_failed(details: str, debug: str | None, transient: bool) -> None:
    err = grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(), details, debug)
    assert is_transient_error(err) is transient
    unknown = grpc.aio.AioRpcError(grpc.StatusCode.UNKNOWN, grpc.aio.Metadata(), grpc.aio.Metadata(), details, debug)
    assert not is_transient_error(unknown)


def test_backoff_is_full_jitter_under_a_doubling_capped_ceiling() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay=0.1, max_delay=0.5)
    err = StatusError(grpc.StatusCode.UNAVAILABLE, "down")
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)]:
        delays = [RetryBudget(policy, None).backoff(err, attempt) for _ in range(400)]
        assert all(0 <= d <= ceiling for d in delays)
        # Full jitter: spread over the whole range, not clustered at the ceiling.
        assert min(delays) < ceiling * 0.1 and max(delays) > ceiling * 0.9
    with pytest.raises(StatusError):
        RetryBudget(policy, None).backoff(err, 10)


def test_backoff_refuses_what_must_not_be_repeated() -> None:
    budget = RetryBudget(RetryPolicy(), None)
    unavailable = StatusError(grpc.StatusCode.UNAVAILABLE, "down")
    with pytest.raises(StatusError) as caught:
        budget.backoff(unavailable, 1, replayable=False)
    assert caught.value is unavailable
    with pytest.raises(StatusError):
        budget.backoff(StatusError(grpc.StatusCode.INTERNAL, "bug"), 1)
    # A backoff that would outlast the call's deadline ends the call with its last error.
    late = RetryBudget(RetryPolicy(base_delay=10, max_delay=10), 0.001)
    time.sleep(0.002)
    with pytest.raises(StatusError) as caught:
        late.backoff(unavailable, 1)
    assert caught.value is unavailable


def test_the_deadline_covers_every_attempt() -> None:
    seen: list[float | None] = []

    def attempt(left: float | None) -> None:
        seen.append(left)
        raise StatusError(grpc.StatusCode.UNAVAILABLE, "down")

    start = time.monotonic()
    with pytest.raises(StatusError) as caught:
        with_retries(RetryPolicy(max_attempts=1000, base_delay=0.02, max_delay=0.02), 0.3, attempt)
    elapsed = time.monotonic() - start
    assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert elapsed < 0.5
    assert len(seen) > 3
    assert all(left is not None and 0 < left <= 0.3 for left in seen)
    assert seen == sorted(seen, reverse=True)


# --- real failures through nginx ---


def test_reset_is_internal_and_transient_without_retries(proxied, run_id: str) -> None:
    replica, url = proxied
    handle = stored(replica, run_id)
    with SpillwayClient(url, retry=RetryPolicy(max_attempts=1)) as c, pytest.raises(grpc.RpcError) as caught:
        chunks = c.read_bytes(run_id, handle)
        next(chunks)
        replica.restart()
        for _ in chunks:
            pass
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert RESET in caught.value.details()
    assert is_transient_error(caught.value)


def test_read_bytes_resumes_after_a_reset(proxied, run_id: str) -> None:
    replica, url = proxied
    handle = stored(replica, run_id)
    calls = Calls()
    with SpillwayClient(url, retry=PATIENT, interceptors=[calls]) as c:
        chunks = c.read_bytes(run_id, handle, verify=True)
        first = next(chunks)
        replica.restart()
        data = first + b"".join(chunks)
    assert hashlib.sha256(data).hexdigest() == DIGEST
    assert calls.attempts["ReadToolOutput"] >= 2


async def test_async_read_bytes_resumes_after_a_reset(proxied, run_id: str) -> None:
    replica, url = proxied
    handle = stored(replica, run_id)
    calls = AsyncCalls()
    async with AsyncSpillwayClient(url, retry=PATIENT, interceptors=calls.interceptors) as c:
        chunks = c.read_bytes(run_id, handle)
        parts = [await chunks.__anext__()]
        await asyncio.to_thread(replica.restart)
        parts.extend([chunk async for chunk in chunks])
    assert hashlib.sha256(b"".join(parts)).hexdigest() == DIGEST
    assert calls.attempts["ReadToolOutput"] >= 2


def test_read_tool_output_retries_a_reset(proxied, run_id: str) -> None:
    replica, url = proxied
    handle = stored(replica, run_id)
    calls = Calls()
    calls.first_response["ReadToolOutput"] = replica.restart
    with SpillwayClient(url, retry=PATIENT, interceptors=[calls]) as c:
        window = c.read_tool_output(run_id, handle, bytes={"offset": 0}, omit_rendered=True)
    assert calls.attempts["ReadToolOutput"] == 2
    assert hashlib.sha256(window.data).hexdigest() == DIGEST


async def test_async_read_tool_output_retries_a_reset(proxied, run_id: str) -> None:
    replica, url = proxied
    handle = stored(replica, run_id)
    calls = AsyncCalls()
    calls.first_response["ReadToolOutput"] = replica.restart
    async with AsyncSpillwayClient(url, retry=PATIENT, interceptors=calls.interceptors) as c:
        window = await c.read_tool_output(run_id, handle, bytes={"offset": 0}, omit_rendered=True)
    assert calls.attempts["ReadToolOutput"] == 2
    assert hashlib.sha256(window.data).hexdigest() == DIGEST


def test_stat_retries_a_replica_that_is_down(proxied, run_id: str) -> None:
    replica, url = proxied
    handle = stored(replica, run_id)
    replica.kill()
    calls = Calls()
    # The first attempt meets nginx's 502 for the dead replica; it is back before the retry.
    calls.after["StatToolOutput"] = replica.start
    with SpillwayClient(url, retry=PATIENT, interceptors=[calls]) as c:
        record = c.stat(run_id, handle)
    assert calls.attempts["StatToolOutput"] == 2
    assert record.sha256 == DIGEST


def test_offload_retries_a_replica_killed_mid_upload(proxied, run_id: str) -> None:
    replica, url = proxied
    calls = Calls()
    # Killed after 8 chunks have gone through nginx; back before the SDK sees the failure.
    calls.request["Offload"] = (8, replica.kill)
    calls.after["Offload"] = replica.start
    with SpillwayClient(url, retry=PATIENT, interceptors=[calls]) as c:
        att = c.offload(key(run_id, "up"), PAYLOAD)
        records = list(c.list_all(run_id))
    assert calls.attempts["Offload"] == 2
    assert att.sha256 == DIGEST
    assert [(r.handle, r.sha256) for r in records] == [(att.handle, DIGEST)]


async def test_async_offload_of_a_view_retries_a_replica_killed_mid_upload(proxied, run_id: str) -> None:
    replica, url = proxied
    calls = AsyncCalls()
    calls.request["Offload"] = (8, replica.kill)
    calls.after["Offload"] = replica.start
    async with AsyncSpillwayClient(url, retry=PATIENT, interceptors=calls.interceptors) as c:
        # A view is sent from the caller's buffer, chunk by chunk, by every attempt.
        att = await c.offload(key(run_id, "view"), memoryview(PAYLOAD))
        records = [r async for r in c.list_all(run_id)]
    assert calls.attempts["Offload"] == 2
    print(f"the killed upload failed with {[(e.code().name, e.details()) for e in calls.failures]}")
    assert len(calls.failures) == 1 and is_transient_error(calls.failures[0])
    assert att.sha256 == DIGEST
    assert [(r.handle, r.sha256) for r in records] == [(att.handle, DIGEST)]


def test_streamed_offload_is_not_repeated(proxied, run_id: str) -> None:
    replica, url = proxied
    calls = Calls()
    calls.request["Offload"] = (8, replica.kill)
    calls.after["Offload"] = replica.start
    pieces = 0

    def stream() -> Iterator[bytes]:
        nonlocal pieces
        for i in range(0, len(PAYLOAD), 1 << 20):
            pieces += 1
            yield PAYLOAD[i : i + (1 << 20)]

    with SpillwayClient(url, retry=PATIENT, interceptors=[calls]) as c:
        with pytest.raises(grpc.RpcError) as caught:
            c.offload(key(run_id, "stream"), stream())
        assert is_transient_error(caught.value)
        assert calls.attempts["Offload"] == 1
        assert pieces < 64
        assert list(c.list_all(run_id)) == []


def test_fork_run_is_not_repeated(proxied, run_id: str) -> None:
    replica, url = proxied
    stored(replica, run_id)
    replica.kill()
    calls = Calls()
    calls.after["ForkRun"] = replica.start
    with SpillwayClient(url, retry=PATIENT, interceptors=[calls]) as c:
        with pytest.raises(grpc.RpcError) as caught:
            c.fork_run(run_id, f"{run_id}-child")
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert calls.attempts["ForkRun"] == 1

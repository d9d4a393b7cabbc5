"""A client's connections: how each reconnects, and spreading calls over them (each call starts on
the one with the fewest open).

A grpc channel connects with its first call, so a client that makes one call at a time uses the
first connection alone, and the others open only for calls made at once; `spillway serve` gives
each connection to one worker, so calls made at once reach several.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from spillway_client._gen.spillway.v1 import spillway_pb2 as pb

RECONNECT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
"""Channel options keeping a lost connection's reconnect attempts frequent: at most about 1 s apart.

After a failed connection attempt gRPC core waits `grpc.initial_reconnect_backoff_ms` before the
next one, then 1.6 times longer after each further failure (±20 % jitter), up to
`grpc.max_reconnect_backoff_ms`; until that attempt, calls on the connection fail at once with
UNAVAILABLE, retries included. Its defaults (1 s, growing to 120 s) kept a client failing for
up to half a minute after a server came back from a 40 s outage. From 0.1 s (gRPC's least) the
first attempts fall within the few tenths of a second a call's retries span, so a retry meets a
new attempt rather than an old wait. `grpc.min_reconnect_backoff_ms`, the least time one attempt
is given to connect (20 s), stays as it is, so a slow handshake is not cut off.
"""

_METHODS = pb.DESCRIPTOR.services_by_name["SpillwayService"].methods
"""The service's methods, with whether each streams its responses."""


class _OpenCalls:
    """_OpenCalls counts the calls open on each of a client's connections, from any thread."""

    def __init__(self, count: int) -> None:
        self._open = [0] * count
        self._lock = threading.Lock()

    def take(self) -> tuple[int, Callable[[], None]]:
        """take counts a call on the connection with the fewest open (the first on a tie).

        It returns that connection's index and what ends the call's count: once; later calls
        of it do nothing.
        """
        with self._lock:
            counts = self._open
            index = 0
            for i in range(1, len(counts)):
                if counts[i] < counts[index]:
                    index = i
            counts[index] += 1
        ended = False

        def end() -> None:
            nonlocal ended
            with self._lock:
                if not ended:
                    ended = True
                    self._open[index] -= 1

        return index, end


class _CountedStream:
    """A blocking call's response stream whose count ends when it ends, fails, is cancelled or dropped."""

    __slots__ = ("_call", "_end")

    def __init__(self, call: Any, end: Callable[[], None]) -> None:
        self._call = call
        self._end = end

    def __iter__(self) -> _CountedStream:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._call)
        except BaseException:
            self._end()
            raise

    def cancel(self) -> bool:
        self._end()
        return bool(self._call.cancel())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)

    def __del__(self) -> None:
        self._end()


class _Stub:
    """A stand-in for a generated stub: one callable per method of the service."""


def spread_stub(stubs: Sequence[Any]) -> Any:
    """spread_stub is one stub over several connections' blocking stubs.

    Each call starts on the connection with the fewest calls open and counts as open until it
    returns, or (a response stream) until its stream ends, fails, is cancelled or is dropped.
    """
    calls = _OpenCalls(len(stubs))
    spread = _Stub()
    for method in _METHODS:
        each = [getattr(stub, method.name) for stub in stubs]
        setattr(
            spread, method.name, _spread_stream(each, calls) if method.server_streaming else _spread_unary(each, calls)
        )
    return spread


def _spread_unary(each: Sequence[Any], calls: _OpenCalls) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        index, end = calls.take()
        try:
            return each[index](*args, **kwargs)
        finally:
            end()

    return call


def _spread_stream(each: Sequence[Any], calls: _OpenCalls) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        index, end = calls.take()
        try:
            return _CountedStream(each[index](*args, **kwargs), end)
        except BaseException:
            end()
            raise

    return call


def spread_async_stub(stubs: Sequence[Any]) -> Any:
    """spread_async_stub is spread_stub for grpc.aio stubs: a call counts as open until it is done."""
    calls = _OpenCalls(len(stubs))
    spread = _Stub()
    for method in _METHODS:
        setattr(spread, method.name, _spread_async([getattr(stub, method.name) for stub in stubs], calls))
    return spread


def _spread_async(each: Sequence[Any], calls: _OpenCalls) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        index, end = calls.take()
        try:
            started = each[index](*args, **kwargs)
        except BaseException:
            end()
            raise
        started.add_done_callback(lambda _: end())
        return started

    return call

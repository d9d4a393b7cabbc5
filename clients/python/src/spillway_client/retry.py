"""The SDK's retry policy (docs/operations.md#retries): which failures are repeated, how often, how patiently.

The TypeScript SDK implements the same policy in clients/ts/src/retry.ts.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from spillway_client.errors import StatusError

T = TypeVar("T")

_STREAM_RESET = re.compile(
    r"Received RST_STREAM with error code 2\b"
    r"|Pending writes failed due to stream closure.*Received RST_STREAM with error code 0\b",
    re.IGNORECASE | re.DOTALL,
)
"""How gRPC C-core words a proxy's reset of a call whose replica died: an RST_STREAM(INTERNAL_ERROR)
of a relayed response, or, when the proxy answered 502 and ended the stream (RST_STREAM(NO_ERROR))
while the request was still being written, the failed write that C-core reports instead of the 502."""

_AIO_WRITE_FAILED = "Internal error from Core"
"""The details grpc.aio gives a call it marks INTERNAL itself (grpc/aio/_call.py, set_internal_error)."""


@dataclass(frozen=True)
class RetryPolicy:
    """RetryPolicy bounds how often and how patiently a client repeats a call (the TS SDK's RetryOptions)."""

    max_attempts: int = 3
    """Attempts in all, the first one included; 1 disables retries."""
    base_delay: float = 0.1
    """Backoff ceiling, in seconds, before the second attempt; doubled for each later one."""
    max_delay: float = 2.0
    """Upper bound, in seconds, of one backoff."""


def is_transient_error(err: grpc.RpcError) -> bool:
    """is_transient_error tells whether a failed call is worth repeating on another connection.

    UNAVAILABLE (a draining replica, a refused connection, a proxy's 502 for a replica that
    died before answering), or the HTTP/2 stream reset a proxy such as nginx sends when the
    replica behind an already-started call dies, which gRPC reports as INTERNAL with
    "Received RST_STREAM with error code 2" (or, for an upload the proxy cut short with its 502,
    "Pending writes failed due to stream closure ... Received RST_STREAM with error code 0").
    grpc.aio adds one of its own: when the transport refuses the write of an upload's next message
    (the stream is gone, as when that proxy's 502 raced the upload), it marks the call INTERNAL
    itself, "Internal error from Core", with the failed SendMessageOperation in its debug string.
    Every other status, another INTERNAL included, is final. Only idempotent calls may be repeated on it: reads, stat, and offloads (the same key
    and bytes commit once).
    """
    code = err.code() if callable(getattr(err, "code", None)) else None
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    if code != grpc.StatusCode.INTERNAL:
        return False
    details = err.details() if callable(getattr(err, "details", None)) else None
    if isinstance(details, str) and _STREAM_RESET.search(details) is not None:
        return True
    debug_error_string = getattr(err, "debug_error_string", None)
    debug = debug_error_string() if callable(debug_error_string) else None
    return details == _AIO_WRITE_FAILED and isinstance(debug, str) and "SendMessageOperation" in debug


class RetryBudget:
    """RetryBudget is the retry state of one call: its deadline over every attempt and backoff,
    and what follows a failure (for callers that run their own attempts, such as a read that
    resumes where the failed attempt stopped)."""

    def __init__(self, policy: RetryPolicy, timeout: float | None) -> None:
        self._policy = policy
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        """left is the time, in seconds, the next attempt has (None: no deadline).

        Raises DEADLINE_EXCEEDED when none is left.
        """
        if self._deadline is None:
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise StatusError(grpc.StatusCode.DEADLINE_EXCEEDED, "the call's deadline passed between retries")
        return left

    def backoff(self, err: grpc.RpcError, attempt: int, *, replayable: bool = True) -> float:
        """backoff returns the sleep before attempt `attempt + 1` after attempt `attempt` (1 for
        the first) failed with err, or re-raises err when the call must not be repeated: err is
        not transient, the attempts are used up, the request cannot be sent again, or the
        backoff would outlast the deadline."""
        if not (is_transient_error(err) and attempt < max(1, self._policy.max_attempts) and replayable):
            raise err
        ceiling = min(self._policy.max_delay, self._policy.base_delay * 2 ** (attempt - 1))
        delay = random.uniform(0, ceiling)
        # Sleeping past the deadline would only turn this failure into a later, vaguer one.
        if self._deadline is not None and self._deadline - time.monotonic() <= delay:
            raise err
        return delay


def with_retries(
    policy: RetryPolicy,
    timeout: float | None,
    attempt: Callable[[float | None], T],
    replayable: Callable[[], bool] = lambda: True,
) -> T:
    """with_retries runs attempt(time left) and repeats it after a transient failure, under
    policy, with exponential backoff and full jitter, never past `timeout` (the whole call's
    deadline, in seconds); the last error is raised unchanged."""
    budget = RetryBudget(policy, timeout)
    n = 1
    while True:
        left = budget.left()
        try:
            return attempt(left)
        except grpc.RpcError as err:
            time.sleep(budget.backoff(err, n, replayable=replayable()))
        n += 1


async def with_retries_async(
    policy: RetryPolicy,
    timeout: float | None,
    attempt: Callable[[float | None], Awaitable[T]],
    replayable: Callable[[], bool] = lambda: True,
) -> T:
    """with_retries for a coroutine: the backoff sleeps without blocking the event loop."""
    budget = RetryBudget(policy, timeout)
    n = 1
    while True:
        left = budget.left()
        try:
            return await attempt(left)
        except grpc.RpcError as err:
            await asyncio.sleep(budget.backoff(err, n, replayable=replayable()))
        n += 1

"""Offloading a tool call's output as its next attempt, for integrations keyed by tool call id.

An agent framework can run the same tool call again (pydantic-ai re-executes a call when a
capability rejects its result with `ModelRetry` and the model repeats the call id; a run replayed
against a fixed Spillway run repeats every call id). Offloading the new output under the same key
would be ALREADY_EXISTS, since outputs are never overwritten. `offload_next_attempt` commits it as
the call's next attempt instead (`res@<n>_<call_id>`), keeping every earlier one readable.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

import grpc

from spillway_client._gen.spillway.v1 import types_pb2 as types_pb
from spillway_client._messages import check_key

MAX_ATTEMPT = 1000
"""The highest attempt a key may carry (BlobKey.attempt)."""


class _Offloader(Protocol):
    async def offload(self, key: Any, data: Any, *, timeout: float | None = None, **options: Any) -> Any: ...


class AttemptTracker:
    """AttemptTracker remembers the latest attempt committed per (tenant, run, call, slot).

    It only saves round trips: the server's records decide. At most `capacity` keys are kept, the
    least recently used dropped first; a forgotten key starts again at the first attempt.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._latest: OrderedDict[tuple[str, str, str, str], int] = OrderedDict()

    def latest(self, key: tuple[str, str, str, str]) -> int:
        """latest is the last attempt committed for key through this tracker, or 1."""
        found = self._latest.get(key)
        if found is None:
            return 1
        self._latest.move_to_end(key)
        return found

    def remember(self, key: tuple[str, str, str, str], attempt: int) -> None:
        """remember records that key's attempt `attempt` is committed."""
        self._latest[key] = max(attempt, self._latest.get(key, 1))
        self._latest.move_to_end(key)
        while len(self._latest) > self._capacity:
            self._latest.popitem(last=False)


async def offload_next_attempt(
    client: _Offloader,
    key: Mapping[str, Any],
    data: Any,
    tracker: AttemptTracker,
    *,
    timeout: float | None = None,
    **options: Any,
) -> types_pb.ResultAttachment:
    """offload_next_attempt offloads `data` for the call `key` names as its latest or next attempt.

    It offloads as the latest attempt `tracker` knows (the first, for a call it has not seen): the
    same bytes replay that attempt's record; other bytes (ALREADY_EXISTS) go to the next attempt,
    and so on up to attempt 1000. So a call offloaded once keeps `res_<call_id>`, and each retry
    whose output differs gets `res@2_<call_id>`, `res@3_<call_id>`, … with every attempt kept.
    Any other failure is raised as it came.
    """
    check_key(key)
    ident = (str(key["tenant"]), str(key["run_id"]), str(key["call_id"]), str(options.get("slot") or ""))
    attempt = tracker.latest(ident)
    while True:
        try:
            attachment = await client.offload({**key, "attempt": attempt}, data, timeout=timeout, **options)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.ALREADY_EXISTS or attempt >= MAX_ATTEMPT:  # type: ignore[attr-defined]
                raise
            attempt += 1
            continue
        tracker.remember(ident, attempt)
        return attachment

"""read_bytes: bulk reads in ranges, across windows, resuming after a lost replica."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from spillway_client import AsyncSpillwayClient, DataLossError, SpillwayClient

PAYLOAD = bytes((i * 131 + (i >> 12)) & 0xFF for i in range(3 * 1024 * 1024 + 5))


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


class _Unavailable(grpc.RpcError):
    """What a stream reports when the replica behind it is lost."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "injected: replica lost"


class _CutReads:
    """Wraps a stub so that each ReadToolOutput stream ends UNAVAILABLE after the planned number
    of frames (one plan entry per call; calls past the plan run whole)."""

    def __init__(self, stub: Any, plan: list[int]) -> None:
        self._stub = stub
        self._plan = plan
        self.calls = 0

    def ReadToolOutput(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        call = self._stub.ReadToolOutput(request, **kwargs)
        after = self._plan.pop(0) if self._plan else None
        return call if after is None else _CutCall(call, after)


class _CutCall:
    def __init__(self, call: Any, after: int) -> None:
        self._call = call
        self._after = after

    def __iter__(self) -> Iterator[Any]:
        for n, frame in enumerate(self._call):
            if n == self._after:
                raise _Unavailable()
            yield frame

    def cancel(self) -> bool:
        return self._call.cancel()


def test_whole_payload_and_ranges(client: SpillwayClient, run_id: str) -> None:
    client.offload(key(run_id, "blob"), PAYLOAD)
    chunks = list(client.read_bytes(run_id, "res_blob"))
    assert hashlib.sha256(b"".join(chunks)).hexdigest() == hashlib.sha256(PAYLOAD).hexdigest()
    assert len(chunks) > 1
    for offset, length in [(0, 1), (1_000_000, 2_500_000), (len(PAYLOAD) - 7, None), (len(PAYLOAD), None), (5, 0)]:
        got = b"".join(client.read_bytes(run_id, "res_blob", offset=offset, length=length))
        assert got == PAYLOAD[offset : None if length is None else offset + length]
    with pytest.raises(ValueError):
        next(client.read_bytes(run_id, "res_blob", offset=-1))


def test_reads_on_past_the_servers_max_bytes_window(small_window_url: str, run_id: str) -> None:
    with SpillwayClient(small_window_url, connections=1) as small:
        small.offload(key(run_id, "blob"), PAYLOAD)
        cut = _CutReads(small.raw, [])
        small.raw = cut
        assert b"".join(small.read_bytes(run_id, "res_blob", offset=3)) == PAYLOAD[3:]
        window = 256 * 1024
        assert cut.calls == -(-(len(PAYLOAD) - 3) // window)


def test_resumes_at_the_first_byte_not_yet_yielded(client_one: SpillwayClient, run_id: str) -> None:
    client_one.offload(key(run_id, "blob"), PAYLOAD)
    raw = client_one.raw
    try:
        # Lost after the header and two data frames, then after one more: three calls in all,
        # though three attempts in a row without progress would give up.
        cut = _CutReads(raw, [3, 2])
        client_one.raw = cut
        assert b"".join(client_one.read_bytes(run_id, "res_blob")) == PAYLOAD
        assert cut.calls == 3
        # Without progress the read gives up after three attempts; a refusal is never retried.
        cut = _CutReads(raw, [0, 0, 0, 0])
        client_one.raw = cut
        with pytest.raises(grpc.RpcError) as lost:
            b"".join(client_one.read_bytes(run_id, "res_blob"))
        assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
        assert cut.calls == 3
        cut = _CutReads(raw, [])
        client_one.raw = cut
        with pytest.raises(grpc.RpcError) as refused:
            b"".join(client_one.read_bytes(run_id, "res_missing"))
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert cut.calls == 1
    finally:
        client_one.raw = raw


async def test_async_read_bytes(aclient: AsyncSpillwayClient, run_id: str) -> None:
    await aclient.offload(key(run_id, "blob"), PAYLOAD)
    got = b"".join([chunk async for chunk in aclient.read_bytes(run_id, "res_blob", offset=10, length=2_000_000)])
    assert got == PAYLOAD[10:2_000_010]


def test_verified_read_checks_the_whole_payload(client: SpillwayClient, run_id: str) -> None:
    client.offload(key(run_id, "blob"), PAYLOAD)
    assert b"".join(client.read_bytes(run_id, "res_blob", verify=True)) == PAYLOAD
    with pytest.raises(ValueError):
        next(client.read_bytes(run_id, "res_blob", offset=1, verify=True))
    with pytest.raises(grpc.RpcError) as refused:
        next(client.read_bytes(run_id, "res_missing", verify=True))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_verified_read_raises_data_loss_when_stored_bytes_changed(
    filesystem_server: tuple[str, Path], run_id: str
) -> None:
    url, store = filesystem_server
    with SpillwayClient(url) as c:
        c.offload(key(run_id, "blob"), PAYLOAD)
        # Bit rot: one byte of the stored blob changes on disk, its size does not.
        [blob] = [p for p in store.rglob("*") if p.is_file() and p.stat().st_size == len(PAYLOAD)]
        stored = bytearray(blob.read_bytes())
        stored[len(stored) // 2] ^= 0x20
        blob.write_bytes(stored)
        assert b"".join(c.read_bytes(run_id, "res_blob")) == stored
        got: list[bytes] = []
        with pytest.raises(DataLossError) as lost:
            # extend keeps what the generator yielded before it raised.
            got.extend(c.read_bytes(run_id, "res_blob", verify=True))
        assert b"".join(got) == stored
        assert lost.value.code() == grpc.StatusCode.DATA_LOSS
        assert hashlib.sha256(PAYLOAD).hexdigest() in lost.value.details()


async def test_async_verified_read(aclient: AsyncSpillwayClient, run_id: str) -> None:
    await aclient.offload(key(run_id, "blob"), PAYLOAD)
    got = b"".join([chunk async for chunk in aclient.read_bytes(run_id, "res_blob", verify=True)])
    assert got == PAYLOAD

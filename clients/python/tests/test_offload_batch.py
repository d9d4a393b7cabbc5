"""OffloadBatch through the Python SDK: items committed on their own, answered in order."""

from __future__ import annotations

import hashlib

import grpc
import pytest

from spillway_client import AsyncSpillwayClient, BatchItemError, SpillwayClient
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb


def key(run_id: str, call_id: str, tenant: str = "dev") -> dict[str, str]:
    return {"tenant": tenant, "run_id": run_id, "call_id": call_id}


def test_each_item_is_committed_or_refused_on_its_own(client: SpillwayClient, run_id: str) -> None:
    client.offload(key(run_id, "dup"), "first\n")
    large = bytes(range(256)) * 200
    results = client.offload_batch(
        [
            (key(run_id, "text"), "alpha\nbeta\n", {"name": "tool"}),
            (key(run_id, "json"), {"rows": [1, 2, 3]}),
            (key(run_id, "large"), large),
            (key(run_id, "dup"), "first\n"),
            (key(run_id, "dup"), "changed\n"),
            (key(run_id, "theirs", tenant="other"), "x"),
            (key(run_id, "badsha"), "y", {"expected_sha256": "0" * 64}),
        ]
    )
    text, as_json, big, same, changed, theirs, badsha = results
    assert isinstance(text, types_pb.ResultAttachment) and text.line_count == 2 and text.name == "tool"
    assert isinstance(as_json, types_pb.ResultAttachment) and as_json.content_type == "application/json"
    assert isinstance(big, types_pb.ResultAttachment) and big.sha256 == hashlib.sha256(large).hexdigest()
    assert big.stored == types_pb.STORAGE_BLOB
    assert isinstance(same, types_pb.ResultAttachment) and same.handle == "res_dup"
    assert isinstance(changed, BatchItemError) and changed.code() == grpc.StatusCode.ALREADY_EXISTS
    assert isinstance(theirs, BatchItemError) and theirs.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "tenant" in theirs.details()
    assert isinstance(badsha, BatchItemError) and badsha.code() == grpc.StatusCode.DATA_LOSS
    assert [a.handle for a in client.list_all(run_id)] == ["res_dup", "res_json", "res_large", "res_text"]
    assert client.read_tool_output(run_id, "res_large", bytes={"offset": 0}).data == large
    assert "first" in client.read_tool_output(run_id, "res_dup").rendered


def test_a_batch_refused_as_a_whole_raises(client: SpillwayClient, run_id: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        client.offload_batch([])
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(TypeError):
        client.offload_batch([(key(run_id, "s"), iter([b"a stream"]))])
    assert list(client.list_all(run_id)) == []


async def test_async_batch(aclient: AsyncSpillwayClient, run_id: str) -> None:
    results = await aclient.offload_batch([(key(run_id, f"c{i}"), f"item {i}\n") for i in range(50)])
    assert [r.handle for r in results if isinstance(r, types_pb.ResultAttachment)] == [f"res_c{i}" for i in range(50)]
    assert (await aclient.stat(run_id, "res_c49")).size_bytes == len(b"item 49\n")

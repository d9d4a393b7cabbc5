"""OffloadBatch through the Python SDK: items committed on their own, answered in order."""

from __future__ import annotations

import asyncio
import hashlib

import grpc
import pytest

from spillway_client import AsyncSpillwayClient, BatchItemError, SpillwayClient, error_reason
from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client._gen.spillway.v1 import spillway_pb2_grpc as pb_grpc
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb

_ABORTED = grpc.StatusCode.ABORTED.value[0]


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


def spy_batches(aclient: AsyncSpillwayClient) -> list[int]:
    """Counts the async client's OffloadBatch calls (the items of each); the calls still reach the server."""
    sizes: list[int] = []
    real = aclient.raw.OffloadBatch

    async def counted(req, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(len(req.items))
        return await real(req, **kwargs)

    aclient.raw.OffloadBatch = counted  # type: ignore[method-assign]
    return sizes


async def test_async_offloads_started_together_share_one_call(aclient_one: AsyncSpillwayClient, run_id: str) -> None:
    sizes = spy_batches(aclient_one)
    payloads = [f"payload {i}\n".encode() * (i + 1) for i in range(40)]
    large = b"x" * 100_000
    big, *small = await asyncio.gather(
        aclient_one.offload(key(run_id, "large"), large),
        *(aclient_one.offload(key(run_id, f"s{i}"), p) for i, p in enumerate(payloads)),
    )
    assert big.sha256 == hashlib.sha256(large).hexdigest()
    assert [a.sha256 for a in small] == [hashlib.sha256(p).hexdigest() for p in payloads]
    assert sizes == [40]
    await aclient_one.offload(key(run_id, "later"), "later\n")
    assert sizes == [40, 1]


async def test_async_item_failure_is_an_rpc_error(aclient: AsyncSpillwayClient, run_id: str) -> None:
    ok, theirs = await asyncio.gather(
        aclient.offload(key(run_id, "ok"), "fine\n"),
        aclient.offload(key(run_id, "x", tenant="other"), "not mine\n"),
        return_exceptions=True,
    )
    assert isinstance(ok, types_pb.ResultAttachment) and ok.handle == "res_ok"
    assert isinstance(theirs, grpc.RpcError) and theirs.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_reason(theirs) is None


async def test_async_offload_cancelled_before_its_batch_is_left_out(
    aclient_one: AsyncSpillwayClient, run_id: str
) -> None:
    sizes = spy_batches(aclient_one)
    gone = asyncio.ensure_future(aclient_one.offload(key(run_id, "gone"), "gone\n"))
    kept = asyncio.ensure_future(aclient_one.offload(key(run_id, "kept"), "kept\n"))
    await asyncio.sleep(0)
    gone.cancel()
    assert (await kept).handle == "res_kept"
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert sizes == [1]
    assert [a.handle async for a in aclient_one.list_all(run_id)] == ["res_kept"]


async def test_async_offload_gives_up_at_its_timeout(aclient_one: AsyncSpillwayClient, run_id: str) -> None:
    real = aclient_one.raw.OffloadBatch

    async def slow(req, **kwargs):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.3)
        return await real(req, **kwargs)

    aclient_one.raw.OffloadBatch = slow  # type: ignore[method-assign]
    with pytest.raises(grpc.RpcError) as caught:
        await aclient_one.offload(key(run_id, "slow"), "slow\n", timeout=0.05)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_async_falls_back_to_offload_streams_when_batches_are_unimplemented(
    aclient_one: AsyncSpillwayClient, run_id: str
) -> None:
    refused: list[int] = []

    async def older_replica(req, **kwargs):  # type: ignore[no-untyped-def]
        refused.append(len(req.items))
        raise BatchItemError(grpc.StatusCode.UNIMPLEMENTED.value[0], "unknown method")

    aclient_one.raw.OffloadBatch = older_replica  # type: ignore[method-assign]
    first = await asyncio.gather(
        aclient_one.offload(key(run_id, "a"), "a\n"), aclient_one.offload(key(run_id, "b"), "b\n")
    )
    assert [a.handle for a in first] == ["res_a", "res_b"]
    assert (await aclient_one.offload(key(run_id, "c"), "c\n")).handle == "res_c"
    assert refused == [2]
    assert [a.handle async for a in aclient_one.list_all(run_id)] == ["res_a", "res_b", "res_c"]


async def test_async_offload_answered_aborted_is_sent_again_alone(
    aclient_one: AsyncSpillwayClient, run_id: str
) -> None:
    real = aclient_one.raw.OffloadBatch
    sizes: list[int] = []

    async def first_fits(req, **kwargs):  # type: ignore[no-untyped-def]
        # A reply with room for the first item's answer only: the others are refused, uncommitted.
        sizes.append(len(req.items))
        answer = await real(pb.OffloadBatchRequest(items=req.items[:1]), **kwargs)
        for _ in req.items[1:]:
            answer.results.add().error.CopyFrom(pb.OffloadBatchError(code=_ABORTED, message="send it again"))
        return answer

    aclient_one.raw.OffloadBatch = first_fits  # type: ignore[method-assign]
    got = await asyncio.gather(*(aclient_one.offload(key(run_id, c), f"{c}\n") for c in "abc"))
    assert [a.handle for a in got] == ["res_a", "res_b", "res_c"]
    assert sizes == [3]
    assert [a.handle async for a in aclient_one.list_all(run_id)] == ["res_a", "res_b", "res_c"]


def wide_item(run_id: str, call_id: str) -> pb.OffloadBatchItem:
    """240,000 bytes of four-byte characters with the longest preview: a record of ~320 KB."""
    return pb.OffloadBatchItem(
        header=pb.OffloadHeader(
            key=types_pb.BlobKey(tenant="dev", run_id=run_id, call_id=call_id),
            content_type="text/plain",
            preview=pb.PreviewOptions(head_chars=20_000, tail_chars=20_000),
        ),
        data=("\U0001f600" * 60_000).encode(),
    )


def test_a_default_grpcio_channel_reads_every_batch_and_list_reply(server_url: str, run_id: str) -> None:
    # A client generated from the proto alone, with grpcio's default 4 MiB receive limit.
    with grpc.insecure_channel(server_url.removeprefix("http://")) as channel:
        stub = pb_grpc.SpillwayServiceStub(channel)
        items = [wide_item(run_id, f"c{i:02}") for i in range(15)]
        res = stub.OffloadBatch(pb.OffloadBatchRequest(items=items))
        kinds = [r.WhichOneof("result") for r in res.results]
        fit = kinds.index("error")
        assert 0 < fit and kinds == ["offloaded"] * fit + ["error"] * (15 - fit)
        assert {r.error.code for r in res.results[fit:]} == {_ABORTED}
        again = stub.OffloadBatch(pb.OffloadBatchRequest(items=items[fit:]))
        assert [r.WhichOneof("result") for r in again.results] == ["offloaded"] * (15 - fit)
        handles: list[str] = []
        token = ""
        while True:
            page = stub.ListToolOutputs(pb.ListToolOutputsRequest(run_id=run_id, page_size=1000, page_token=token))
            handles += [a.handle for a in page.attachments]
            token = page.next_page_token
            if not token:
                break
        assert handles == [f"res_c{i:02}" for i in range(15)]


def test_offload_batch_sends_again_the_items_the_reply_had_no_room_for(client: SpillwayClient, run_id: str) -> None:
    wide = "\U0001f600" * 60_000
    options = {"content_type": "text/plain", "preview": {"head_chars": 20_000, "tail_chars": 20_000}}
    results = client.offload_batch([(key(run_id, f"c{i:02}"), wide, options) for i in range(15)])
    # 15 records of ~320 KB: more than one reply holds.
    assert all(isinstance(r, types_pb.ResultAttachment) and len(r.preview.head) == 20_000 for r in results)
    assert [r.handle for r in results if isinstance(r, types_pb.ResultAttachment)] == [
        f"res_c{i:02}" for i in range(15)
    ]

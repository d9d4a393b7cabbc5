"""Retries keep every attempt: the key's `attempt` in both clients and batches, and
`offload_next_attempt`, which turns a call offloaded again with other bytes into its next attempt."""

from __future__ import annotations

import grpc
import pytest

from spillway_client import AsyncSpillwayClient, AttemptTracker, SpillwayClient, offload_next_attempt
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb


def test_sync_attempts_are_their_own_outputs(client: SpillwayClient, run_id: str) -> None:
    base = {"tenant": "dev", "run_id": run_id, "call_id": "c"}
    first = client.offload(base, b"first\n")
    second = client.offload({**base, "attempt": 2}, b"second\n", name="tool")
    third = client.offload(types_pb.BlobKey(tenant="dev", run_id=run_id, call_id="c"), b"third\n", attempt=3)
    assert (first.handle, first.attempt) == ("res_c", 1)
    assert (second.handle, second.attempt, second.key.attempt) == ("res@2_c", 2, 2)
    assert (third.handle, third.attempt) == ("res@3_c", 3)
    assert "· attempt 2 ·" in second.preview.text and "attempt" not in first.preview.text
    # The same bytes for an attempt replay it; other bytes are refused, never overwritten.
    assert client.offload(base, b"second\n", attempt=2) == second
    with pytest.raises(grpc.RpcError) as caught:
        client.offload(base, b"other\n", attempt=2)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    # 0 and 1 both name the first attempt.
    assert client.offload(base, b"first\n", attempt=0) == first
    assert client.offload(base, b"first\n", attempt=1) == first
    for handle, data in [("res_c", b"first\n"), ("res@2_c", b"second\n"), ("res@3_c", b"third\n")]:
        assert client.read_tool_output(run_id, handle, bytes={"offset": 0}).data == data
    assert [a.handle for a in client.list(run_id).attachments] == ["res_c", "res@2_c", "res@3_c"]


async def test_async_and_batched_offloads_carry_the_attempt(aclient: AsyncSpillwayClient, run_id: str) -> None:
    base = {"tenant": "dev", "run_id": run_id, "call_id": "b"}
    # Small payloads share an OffloadBatch; each item keeps its own attempt.
    small = [await aclient.offload({**base, "attempt": n}, f"attempt {n}\n") for n in (1, 2)]
    assert [a.handle for a in small] == ["res_b", "res@2_b"]
    batch = await aclient.offload_batch(
        [(base, "batched three\n", {"attempt": 3}), ({**base, "attempt": 4}, "batched four\n", {"slot": "stdout"})]
    )
    assert [getattr(r, "handle", r) for r in batch] == ["res@3_b", "out@4_b_stdout"]
    window = await aclient.read_tool_output(run_id, "out@4_b_stdout", lines={"offset": 0})
    assert "batched four" in window.rendered


async def test_a_call_offloaded_again_becomes_its_next_attempt(aclient: AsyncSpillwayClient, run_id: str) -> None:
    key = {"tenant": "dev", "run_id": run_id, "call_id": "toolu_01"}
    tracker = AttemptTracker()
    first = await offload_next_attempt(aclient, key, b"output one\n", tracker)
    again = await offload_next_attempt(aclient, key, b"output one\n", tracker)
    second = await offload_next_attempt(aclient, key, b"output two\n", tracker)
    third = await offload_next_attempt(aclient, key, b"output three\n", tracker)
    assert [first.handle, again.handle, second.handle, third.handle] == [
        "res_toolu_01",
        "res_toolu_01",
        "res@2_toolu_01",
        "res@3_toolu_01",
    ]
    # A fresh tracker (another process) finds the attempts through the server's answers.
    fourth = await offload_next_attempt(aclient, key, b"output four\n", AttemptTracker())
    assert fourth.handle == "res@4_toolu_01"
    for handle, text in [("res_toolu_01", "output one"), ("res@3_toolu_01", "output three")]:
        assert text in (await aclient.read_tool_output(run_id, handle)).rendered


def test_tracker_forgets_the_least_recently_used_key() -> None:
    tracker = AttemptTracker(capacity=2)
    tracker.remember(("t", "r", "a", ""), 3)
    tracker.remember(("t", "r", "b", ""), 2)
    assert tracker.latest(("t", "r", "a", "")) == 3
    tracker.remember(("t", "r", "c", ""), 5)
    assert tracker.latest(("t", "r", "b", "")) == 1
    assert tracker.latest(("t", "r", "a", "")) == 3
    # An attempt never goes back.
    tracker.remember(("t", "r", "a", ""), 2)
    assert tracker.latest(("t", "r", "a", "")) == 3

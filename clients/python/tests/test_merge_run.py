"""merge_run on the sync and async clients against a real server."""

from __future__ import annotations

import grpc
import pytest

from spillway_client import AsyncSpillwayClient, SpillwayClient


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


def test_merge_run_brings_the_childs_outputs_once(client: SpillwayClient, run_id: str) -> None:
    parent, child = run_id, f"{run_id}-child"
    client.offload(key(parent, "base"), "base\n")
    assert client.fork_run(parent, child) == 1
    client.offload(key(child, "x"), "from the child\n")
    res = client.merge_run(child, parent)
    assert (res.merged_attachments, res.unchanged_attachments) == (1, 0)
    assert [a.handle for a in client.list_all(parent)] == ["res_base", "res_x"]
    assert client.read_tool_output(parent, "res_x", bytes={"offset": 0}).data == b"from the child\n"
    again = client.merge_run(child, parent)
    assert (again.merged_attachments, again.unchanged_attachments) == (0, 1)
    client.delete_run(child)
    assert client.read_tool_output(parent, "res_x", bytes={"offset": 0}).data == b"from the child\n"


def test_merge_run_refuses_other_bytes_and_other_parents(client: SpillwayClient, run_id: str) -> None:
    parent, child = run_id, f"{run_id}-child"
    client.fork_run(parent, child)
    client.offload(key(child, "z"), "child z\n")
    client.offload(key(parent, "z"), "parent z\n")
    with pytest.raises(grpc.RpcError) as caught:
        client.merge_run(child, parent)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "res_z" in (caught.value.details() or "")
    with pytest.raises(grpc.RpcError) as caught:
        client.merge_run(child, f"{run_id}-other")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as caught:
        client.merge_run(f"{run_id}-missing", parent)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_async_merge_run(aclient: AsyncSpillwayClient, run_id: str) -> None:
    parent, child = run_id, f"{run_id}-child"
    await aclient.fork_run(parent, child)
    await aclient.offload(key(child, "a"), "a\n")
    await aclient.offload(key(child, "b"), "b\n")
    res = await aclient.merge_run(child, parent)
    assert (res.merged_attachments, res.unchanged_attachments) == (2, 0)
    assert [a.handle async for a in aclient.list_all(parent)] == ["res_a", "res_b"]

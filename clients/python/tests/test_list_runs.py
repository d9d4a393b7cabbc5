"""list_runs and list_all_runs, sync and async, against a real server of the test's own."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from conftest import spillway_server
from spillway_client import AsyncSpillwayClient, SpillwayClient


@pytest.fixture
def own_url() -> Iterator[str]:
    """A memory-backend server that holds only this test's runs."""
    with spillway_server() as url:
        yield url


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


def test_list_runs_pages_through_every_run_with_counts_ttl_and_parent(own_url: str) -> None:
    with SpillwayClient(own_url) as client:
        for i in range(7):
            client.offload(key(f"run-{i}", "a"), "12345\n")
        client.offload(key("run-0", "b"), "678\n")
        client.set_run_ttl("run-1", 3600)
        client.fork_run("run-0", "fork")
        client.offload(key("gone", "a"), "x\n")
        client.delete_run("gone")

        seen = []
        token = ""
        pages = 0
        while True:
            page = client.list_runs(page_size=3, page_token=token)
            assert len(page.runs) <= 3
            seen.extend(page.runs)
            pages += 1
            token = page.next_page_token
            if not token:
                break
        assert pages == 3
        ids = [r.run_id for r in seen]
        assert len(ids) == len(set(ids)) == 8
        assert set(ids) == {*(f"run-{i}" for i in range(7)), "fork"}
        runs = {r.run_id: r for r in client.list_all_runs(page_size=2)}
        assert set(runs) == set(ids)
        assert (runs["run-0"].output_count, runs["run-0"].size_bytes) == (2, 10)
        assert runs["run-1"].HasField("expire_time") and not runs["run-0"].HasField("expire_time")
        assert runs["fork"].parent_run_id == "run-0" and runs["fork"].output_count == 2
        assert runs["run-0"].parent_run_id == ""

        with pytest.raises(grpc.RpcError) as caught:
            client.list_runs(page_token="not-a-token")
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as caught:
            client.list_runs(page_size=1001)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_async_list_all_runs(own_url: str) -> None:
    async with AsyncSpillwayClient(own_url) as client:
        for i in range(5):
            await client.offload(key(f"a-{i}", "c"), f"{i}\n")
        page = await client.list_runs(page_size=2)
        assert len(page.runs) == 2 and page.next_page_token != ""
        ids = [r.run_id async for r in client.list_all_runs(page_size=2)]
        assert sorted(ids) == [f"a-{i}" for i in range(5)]

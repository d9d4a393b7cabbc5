"""What an offload answers when the caller's side fails: its stream raises, or the client closes."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

from spillway_client import AsyncSpillwayClient, SpillwayClient


class ToolCrashed(Exception):
    """What a tool raises half way through the output it streams."""


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


def crashing() -> Iterator[bytes]:
    yield b"first part of the output\n" * 1000
    raise ToolCrashed("the tool died half way")


async def acrashing() -> AsyncIterator[bytes]:
    yield b"first part of the output\n" * 1000
    await asyncio.sleep(0)
    raise ToolCrashed("the tool died half way")


def assert_nothing_committed(client: SpillwayClient, run_id: str, call_id: str) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        client.stat(run_id, f"res_{call_id}")
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_sync_offload_raises_what_the_stream_raised(client: SpillwayClient, run_id: str) -> None:
    with pytest.raises(ToolCrashed, match="half way"):
        client.offload(key(run_id, "c1"), crashing())
    assert_nothing_committed(client, run_id, "c1")


@pytest.mark.parametrize("stream", [crashing, acrashing], ids=["iterator", "async iterator"])
async def test_async_offload_raises_what_the_stream_raised(
    aclient: AsyncSpillwayClient, client: SpillwayClient, run_id: str, stream
) -> None:
    # grpc.aio cancels the call and raised CancelledError in a task nobody had cancelled.
    with pytest.raises(ToolCrashed, match="half way"):
        await aclient.offload(key(run_id, "c1"), stream())
    assert_nothing_committed(client, run_id, "c1")


async def test_a_task_group_sees_the_stream_failure(aclient: AsyncSpillwayClient, run_id: str) -> None:
    # A CancelledError from a child made the group end without any error, the failure lost.
    failed: Exception | None = None
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(aclient.offload(key(run_id, "c1"), acrashing()))
            group.create_task(aclient.offload(key(run_id, "c2"), b"fine"))
    except Exception as err:  # noqa: BLE001 - an ExceptionGroup, a name Python 3.10 lacks
        failed = err
    assert [type(err) for err in getattr(failed, "exceptions", [])] == [ToolCrashed]


async def test_a_caller_cancelling_its_offload_still_cancels_it(aclient: AsyncSpillwayClient, run_id: str) -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536
            await asyncio.sleep(0.01)

    task = asyncio.ensure_future(aclient.offload(key(run_id, "c1"), endless()))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_closing_the_client_settles_every_offload_in_flight(server_url: str, run_id: str) -> None:
    # Small offloads wait on a shared OffloadBatch; closing the client killed its task and left
    # every caller waiting for ever. Large ones ended in CancelledError.
    client = AsyncSpillwayClient(server_url)
    small = [asyncio.ensure_future(client.offload(key(run_id, f"s{i}"), b"x" * 1000)) for i in range(50)]
    large = [asyncio.ensure_future(client.offload(key(run_id, f"l{i}"), b"y" * (8 << 20))) for i in range(4)]
    await asyncio.sleep(0.05)
    await client.close()
    outcomes = await asyncio.wait_for(asyncio.gather(*small, *large, return_exceptions=True), 20)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert failures, "the close came after every offload had finished"
    assert {type(err).__name__ for err in failures} == {"StatusError"}
    assert {err.code() for err in failures} == {grpc.StatusCode.CANCELLED}


def _async_client_in_child(url: str) -> None:
    async def use() -> None:
        async with AsyncSpillwayClient(url) as c:
            await c.server_info(timeout=5)

    try:
        asyncio.run(use())
    except RuntimeError as err:
        os._exit(3 if "fork()ed from one that used it" in str(err) else 4)
    os._exit(0)


async def test_a_forked_child_of_an_async_client_user_is_refused_not_crashed(server_url: str) -> None:
    # grpc.aio does not survive fork(): such a child crashed (SIGSEGV, SIGABRT) or hung.
    async with AsyncSpillwayClient(server_url) as c:
        await c.server_info(timeout=5)
    child = multiprocessing.get_context("fork").Process(target=_async_client_in_child, args=(server_url,))
    child.start()
    child.join(60)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode == 3


async def test_closing_the_client_ends_every_kind_of_call_cancelled() -> None:
    # A server that accepts connections and never answers keeps every call in flight.
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = AsyncSpillwayClient(f"127.0.0.1:{port}")

    async def drain(stream: AsyncIterator[object]) -> None:
        async for _ in stream:
            pass

    calls = [
        asyncio.ensure_future(client.fork_run("parent", "child")),
        asyncio.ensure_future(client.stat("run", "res_x")),
        asyncio.ensure_future(client.read_tool_output("run", "res_x")),
        asyncio.ensure_future(drain(client.read_bytes("run", "res_x"))),
        asyncio.ensure_future(drain(client.list_all("run"))),
    ]
    await asyncio.sleep(0.3)
    await client.close()
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 20)
    server.close()
    # Each ended in CancelledError, which a TaskGroup around them would have taken for its own.
    assert [type(o).__name__ for o in outcomes] == ["StatusError"] * len(calls)
    assert {o.code() for o in outcomes if isinstance(o, grpc.RpcError)} == {grpc.StatusCode.CANCELLED}

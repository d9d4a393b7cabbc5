"""Reconnecting after an outage: a real server is killed, stays down long enough for gRPC's default
reconnect backoff to have grown past 10 s, and comes back on the same port; both clients, calling
all along, are served again within about a second of its return."""

from __future__ import annotations

import asyncio
import time

import grpc

from conftest import spillway_process
from nginx_proxy import free_port
from spillway_client import AsyncSpillwayClient, SpillwayClient

DOWN_SECONDS = 18.5
"""From the first failed call to the restart (the server listens about a second later). With gRPC's default
backoff (1 s, x1.6, ±20 % jitter) the connection's attempts after that first one fall about 9.3 s
and 15.8 s (at most 18.8 s) into the outage, and the next one 21-31 s in, 10.5 s after the one
before: so without reconnect settings the clients would stay failing for seconds after the
server is back."""
SERVED_WITHIN = 2.5
"""Seconds after the server listens again by which each client must have been served."""
GIVE_UP = 60.0
"""Seconds a client keeps calling before the test stops waiting for it."""


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


def served_again(client: SpillwayClient, run_id: str) -> float:
    """Offloads every 0.1 s (each call with the client's retries) until one succeeds; returns when."""
    until = time.monotonic() + GIVE_UP
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            client.offload(key(run_id, f"sync-{n}"), f"call {n}\n", timeout=2)
            return time.monotonic()
        except grpc.RpcError as err:
            assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), err
        time.sleep(0.1)
    return float("inf")


async def served_again_async(client: AsyncSpillwayClient, run_id: str) -> float:
    """served_again for the async client."""
    until = time.monotonic() + GIVE_UP
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            await client.offload(key(run_id, f"async-{n}"), f"call {n}\n", timeout=2)
            return time.monotonic()
        except grpc.RpcError as err:
            assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), err
        await asyncio.sleep(0.1)
    return float("inf")


async def test_both_clients_are_served_within_seconds_of_the_servers_return(run_id: str) -> None:
    port = free_port()
    with spillway_process(port=port) as (url, proc):
        sync_client = SpillwayClient(url)
        async_client = AsyncSpillwayClient(url)
        sync_client.offload(key(run_id, "before-sync"), "up\n")
        await async_client.offload(key(run_id, "before-async"), "up\n")
        proc.kill()
        proc.wait()
    try:
        # Both keep calling through the outage, as an agent would; their first calls fail at once.
        down = time.monotonic()
        sync_done = asyncio.ensure_future(asyncio.to_thread(served_again, sync_client, run_id))
        async_done = asyncio.ensure_future(served_again_async(async_client, run_id))
        await asyncio.sleep(DOWN_SECONDS)
        assert not sync_done.done() and not async_done.done()
        # The same build as before, so that the restart does not wait on a build check.
        with spillway_process(port=port, build=False) as (again, _):
            back = time.monotonic()
            assert again == url
            sync_at, async_at = await asyncio.gather(sync_done, async_done)
        waited = (round(sync_at - back, 2), round(async_at - back, 2))
        print(f"\nserver back {back - down:.1f} s after going down; served again after (sync, async) {waited} s")
        assert max(waited) < SERVED_WITHIN, waited
    finally:
        sync_client.close()
        await async_client.close()

"""The clients' `connections` option: several HTTP/2 connections, taken in turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import spillway_server
from spillway_client import AsyncSpillwayClient, SpillwayClient


def _established_to(port: int) -> int:
    """Counts the established TCP connections whose far end is `port` (this machine's loopback)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01":
                count += 1
    return count


def _offload_together(client: SpillwayClient, run_id: str, count: int) -> None:
    """Offloads `count` streams from as many threads, all open at once before any ends."""
    together = threading.Barrier(count)

    def pieces(i: int) -> Iterator[bytes]:
        yield f"out {i} ".encode()
        together.wait(timeout=20)
        yield b"end\n"

    with ThreadPoolExecutor(count) as pool:
        done = [
            pool.submit(client.offload, {"tenant": "dev", "run_id": run_id, "call_id": f"c{i}"}, pieces(i))
            for i in range(count)
        ]
        for future in done:
            future.result()


def test_a_blocking_client_holds_one_connection_for_one_call_at_a_time_and_four_for_more() -> None:
    with spillway_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with SpillwayClient(url) as client:
            for i in range(6):
                client.offload({"tenant": "dev", "run_id": "one", "call_id": f"c{i}"}, f"out {i}\n")
                assert f"out {i}" in client.read_tool_output("one", f"res_c{i}").rendered
            assert _established_to(port) == 1
            _offload_together(client, "together", 4)
            assert _established_to(port) == 4
            for i in range(4):
                assert f"out {i} end" in client.read_tool_output("together", f"res_c{i}").rendered
        with SpillwayClient(url, connections=2) as client:
            _offload_together(client, "two", 4)
            assert _established_to(port) == 2


def test_a_stream_left_early_no_longer_counts_against_its_connection() -> None:
    with spillway_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with SpillwayClient(url) as client:
            client.offload({"tenant": "dev", "run_id": "r", "call_id": "big"}, b"x" * 300_000)
            reader = client.read_bytes("r", "res_big")
            next(reader)
            reader.close()
            for _ in range(3):
                client.server_info()
            assert _established_to(port) == 1


def test_an_async_client_holds_one_connection_for_one_call_at_a_time_and_more_for_calls_at_once() -> None:
    async def run(url: str, connections: int | None) -> tuple[int, int]:
        port = int(url.rsplit(":", 1)[1])
        client = AsyncSpillwayClient(url) if connections is None else AsyncSpillwayClient(url, connections=connections)
        async with client:
            for _ in range(3):
                await client.server_info()
            alone = _established_to(port)
            await asyncio.gather(*(client.server_info() for _ in range(6)))
            return alone, _established_to(port)

    with spillway_server() as url:
        assert asyncio.run(run(url, None)) == (1, 4)
    with spillway_server() as url:
        assert asyncio.run(run(url, 2)) == (1, 2)


@pytest.mark.parametrize("connections", [0, 65, 1.5, True])
def test_a_count_outside_1_to_64_is_refused(connections: object) -> None:
    with pytest.raises(ValueError, match="connections must be a whole number from 1 to 64"):
        SpillwayClient("127.0.0.1:1", connections=connections)  # type: ignore[arg-type]

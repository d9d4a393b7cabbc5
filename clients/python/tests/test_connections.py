"""The clients' `connections` option: several HTTP/2 connections, taken in turn."""

from __future__ import annotations

import asyncio
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


def test_a_blocking_client_opens_that_many_connections_and_uses_each() -> None:
    with spillway_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with SpillwayClient(url, connections=3) as client:
            for i in range(6):
                client.offload({"tenant": "dev", "run_id": "r", "call_id": f"c{i}"}, f"out {i}\n")
            assert _established_to(port) == 3
            for i in range(6):
                assert f"out {i}" in client.read_tool_output("r", f"res_c{i}").rendered
        with SpillwayClient(url) as client:
            client.server_info()
            assert _established_to(port) == 1


def test_an_async_client_opens_that_many_connections() -> None:
    async def run(url: str) -> int:
        async with AsyncSpillwayClient(url, connections=2) as client:
            await asyncio.gather(*(client.server_info() for _ in range(4)))
            return _established_to(int(url.rsplit(":", 1)[1]))

    with spillway_server() as url:
        assert asyncio.run(run(url)) == 2


@pytest.mark.parametrize("connections", [0, 65, 1.5, True])
def test_a_count_outside_1_to_64_is_refused(connections: object) -> None:
    with pytest.raises(ValueError, match="connections must be a whole number from 1 to 64"):
        SpillwayClient("127.0.0.1:1", connections=connections)  # type: ignore[arg-type]

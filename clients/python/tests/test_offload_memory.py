"""Offloading a payload held whole streams it: the client never holds a second copy.

Each offload runs in a subprocess of its own, so its peak resident memory (VmHWM) is the SDK's
and gRPC's, C-core buffers included, which tracemalloc would not see.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import spillway_server
from spillway_client import SpillwayClient

PAYLOAD_BYTES = 256 * 1024 * 1024
GROWTH_LIMIT = 48 * 1024 * 1024
"""Most the client's peak RSS may grow while offloading PAYLOAD_BYTES (a copy would be 256 MiB)."""

CHILD = textwrap.dedent(
    """
    import asyncio, hashlib, json, sys
    from spillway_client import AsyncSpillwayClient, SpillwayClient

    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field}")

    def reset_peak():
        # Writing 5 resets VmHWM to the current RSS (Linux 4.0+), so the payload's own build is not counted.
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status("VmRSS")

    def peak():
        return status("VmHWM")

    url, size, mode, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    payload = bytearray(size)
    for i in range(0, size, 4096):
        payload[i : i + 8] = i.to_bytes(8, "little")
    data = {"bytes": bytes(payload), "bytearray": payload, "memoryview": memoryview(payload)}[kind]
    if kind == "bytes":
        del payload
    key = {"tenant": "dev", "run_id": "memory", "call_id": f"{mode}-{kind}"}

    async def run_async():
        async with AsyncSpillwayClient(url) as c:
            await c.offload({**key, "call_id": "warm-" + key["call_id"]}, b"w" * (2 << 20))
            before = reset_peak()
            att = await c.offload(key, data)
            return before, att

    if mode == "sync":
        with SpillwayClient(url) as c:
            c.offload({**key, "call_id": "warm-" + key["call_id"]}, b"w" * (2 << 20))
            before = reset_peak()
            att = c.offload(key, data)
    else:
        before, att = asyncio.run(run_async())
    after = peak()
    print(json.dumps({
        "growth": after - before,
        "sha256": att.sha256,
        "size": att.size_bytes,
        "handle": att.handle,
        "expected": hashlib.sha256(data).hexdigest(),
    }))
    """
)


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory):
    """A filesystem-backend server, so 256 MiB payloads go to disk rather than server memory."""
    with spillway_server("--data-dir", str(tmp_path_factory.mktemp("store")), backend="filesystem") as url:
        yield url


@pytest.mark.parametrize(
    ("mode", "kind"), [("sync", "bytes"), ("sync", "bytearray"), ("async", "bytes"), ("async", "memoryview")]
)
def test_offload_of_whole_bytes_streams_without_a_copy(big_server: str, mode: str, kind: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, big_server, str(PAYLOAD_BYTES), mode, kind],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    result = json.loads(out.stdout)
    print(f"{mode} offload of a {PAYLOAD_BYTES >> 20} MiB {kind}: peak RSS grew {result['growth'] / 2**20:.1f} MiB")
    assert result["size"] == PAYLOAD_BYTES
    assert result["sha256"] == result["expected"]
    assert result["growth"] < GROWTH_LIMIT, f"peak RSS grew {result['growth']} bytes"

    # The stored bytes are the payload's: read back and hashed here, in another process.
    with SpillwayClient(big_server) as c:
        digest = hashlib.sha256()
        total = 0
        for chunk in c.read_bytes("memory", result["handle"], verify=True):
            digest.update(chunk)
            total += len(chunk)
    assert total == PAYLOAD_BYTES
    assert digest.hexdigest() == result["expected"]

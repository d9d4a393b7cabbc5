"""A key mapping without tenant, run_id or call_id is a ValueError naming the missing field, raised by
every offload path of both clients before anything is sent (not a bare KeyError)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from spillway_client import AsyncSpillwayClient, AttemptTracker, SpillwayClient, offload_next_attempt

FIELDS = ["tenant", "run_id", "call_id"]


def key_without(missing: str, run_id: str, call_id: str = "call-1") -> dict[str, str]:
    full = {"tenant": "dev", "run_id": run_id, "call_id": call_id}
    return {name: value for name, value in full.items() if name != missing}


def names(missing: str) -> str:
    return f"key is missing '{missing}': a key needs 'tenant', 'run_id' and 'call_id'"


async def chunks() -> AsyncIterator[bytes]:
    yield b"streamed\n"


@pytest.mark.parametrize("missing", FIELDS)
def test_sync_offload_names_the_missing_field(client: SpillwayClient, run_id: str, missing: str) -> None:
    key = key_without(missing, run_id)
    with pytest.raises(ValueError, match=names(missing)):
        client.offload(key, "whole\n")
    with pytest.raises(ValueError, match=names(missing)):
        client.offload(key, iter([b"streamed\n"]))
    with pytest.raises(ValueError, match=f"offload_batch item 1: {names(missing)}"):
        client.offload_batch([(key_without("", run_id, "good"), "kept?\n"), (key, "refused\n")])
    # Refused before the call: not even the batch's good item was committed.
    assert list(client.list_all(run_id)) == []


@pytest.mark.parametrize("missing", FIELDS)
async def test_async_offload_names_the_missing_field(aclient: AsyncSpillwayClient, run_id: str, missing: str) -> None:
    key = key_without(missing, run_id)
    with pytest.raises(ValueError, match=names(missing)):
        await aclient.offload(key, "small, batched with its neighbours\n")
    with pytest.raises(ValueError, match=names(missing)):
        await aclient.offload(key, b"x" * (128 * 1024))  # over 64 KiB: its own Offload stream
    with pytest.raises(ValueError, match=names(missing)):
        await aclient.offload(key, chunks())
    with pytest.raises(ValueError, match=f"offload_batch item 0: {names(missing)}"):
        await aclient.offload_batch([(key, "refused\n"), (key_without("", run_id, "good"), "kept?\n")])
    with pytest.raises(ValueError, match=names(missing)):
        await offload_next_attempt(aclient, key, b"output\n", AttemptTracker())
    assert [a async for a in aclient.list_all(run_id)] == []


def test_every_missing_field_is_named(client: SpillwayClient) -> None:
    with pytest.raises(ValueError, match="key is missing 'tenant', 'run_id', 'call_id'"):
        client.offload({}, "x\n")

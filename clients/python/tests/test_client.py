"""The sync and async clients against a real server."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import hashlib
import re
from collections.abc import Iterator

import grpc
import pytest

from conftest import spillway_server
from spillway_client import AsyncSpillwayClient, SpillwayClient, error_reason
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb

LOG = "".join(f"line {i + 1} of the build log\n" for i in range(1000))


def key(run_id: str, call_id: str) -> dict[str, str]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call_id}


NAME = "report-\udcff.csv"
"""What os.fsdecode gives for the file name b"report-\\xff.csv": a str holding a lone surrogate."""
UNPAIRED = f"{NAME} \ud83d x \ude00 \ud83d\ude00\n"
"""Text with surrogates that are no pair, and a high and a low one that are (as in a JS string)."""
UNPAIRED_STORED = "report-\ufffd.csv \ufffd x \ufffd \U0001f600\n".encode()
"""UNPAIRED as the TS SDK stores the same UTF-16 code units (Buffer.from(text, "utf8"))."""
UNPAIRED_JSON = {"name": NAME, NAME: [UNPAIRED]}
UNPAIRED_JSON_STORED = (
    r'{"name":"report-\udcff.csv","report-\udcff.csv":["report-\udcff.csv \ud83d x \ude00 ' + "\U0001f600" + r'\n"]}'
).encode()
"""UNPAIRED_JSON as the TS SDK stores it: the text JSON.stringify writes, with an escape for each
surrogate that is no pair."""


def lines_of(window) -> list[tuple[int, str]]:
    return [
        (line.number, line.text)
        for f in window.frames
        if f.WhichOneof("frame") == "content"
        for line in f.content.lines.lines
    ]


def test_sync_offload_and_read_round_trip(client: SpillwayClient, run_id: str) -> None:
    att = client.offload(key(run_id, "call-1"), LOG, name="build")
    assert att.handle == "res_call-1"
    assert att.size_bytes == len(LOG.encode())
    assert att.sha256 == hashlib.sha256(LOG.encode()).hexdigest()
    assert att.line_count == 1000
    assert att.stored in (types_pb.STORAGE_INLINE, types_pb.STORAGE_BLOB)
    assert att.preview.text.startswith("[res_call-1]")

    win = client.read_tool_output(run_id, att.handle, lines={"offset": 10, "limit": 3})
    assert win.header is not None and win.header.total_lines == 1000
    assert lines_of(win) == [
        (11, "line 11 of the build log"),
        (12, "line 12 of the build log"),
        (13, "line 13 of the build log"),
    ]
    assert win.trailer is not None and win.trailer.next_offset == 13
    assert "line 12 of the build log" in win.rendered
    assert win.rendered.startswith("[res_call-1] lines 11-13 of 1000")

    whole = client.read_tool_output(run_id, att.handle, bytes={"offset": 0})
    assert whole.data == LOG.encode()


async def test_async_offload_and_read_round_trip(aclient: AsyncSpillwayClient, run_id: str) -> None:
    async def chunks():
        for i in range(0, len(LOG), 997):
            yield LOG[i : i + 997].encode()

    att = await aclient.offload(key(run_id, "call-a"), chunks())
    assert att.sha256 == hashlib.sha256(LOG.encode()).hexdigest()
    win = await aclient.read_tool_output(run_id, att.handle, lines={"offset": 0, "limit": 2, "from_end": True})
    assert lines_of(win) == [(999, "line 999 of the build log"), (1000, "line 1000 of the build log")]
    assert (await aclient.stat(run_id, att.handle)).sha256 == att.sha256
    listed = [a.handle async for a in aclient.list_all(run_id)]
    assert listed == ["res_call-a"]


def test_deep_window_in_a_large_payload(client: SpillwayClient, run_id: str) -> None:
    def gen() -> Iterator[bytes]:
        for block in range(50):
            yield "".join(f"row {block * 10_000 + i + 1}\n" for i in range(10_000)).encode()

    att = client.offload(key(run_id, "big"), gen())
    assert att.line_count == 500_000
    win = client.read_tool_output(run_id, att.handle, lines={"offset": 399_999, "limit": 3})
    assert lines_of(win) == [(400_000, "row 400000"), (400_001, "row 400001"), (400_002, "row 400002")]
    assert win.rendered.startswith("[res_big] lines 400000-400002 of 500000")


def test_search_with_context_and_paging(client: SpillwayClient, run_id: str) -> None:
    text = "".join(("ERROR disk full\n" if i % 100 == 0 else f"ok {i}\n") for i in range(1000))
    att = client.offload(key(run_id, "s"), text)
    win = client.read_tool_output(
        run_id, att.handle, search={"pattern": "error", "ignore_case": True, "max_matches": 3, "context_lines": 1}
    )
    matches = [m for f in win.frames if f.WhichOneof("frame") == "content" for m in f.content.matches.matches]
    assert [m.line.number for m in matches] == [1, 101, 201]
    assert [line.text for line in matches[1].before] == ["ok 99"]
    assert win.trailer is not None and win.trailer.next_offset == 3 and not win.trailer.eof
    assert win.rendered.endswith("[more matches: skip=3]\n")
    # ok 901..999: line 900 (i % 100 == 0) is an ERROR line.
    regex = client.read_tool_output(
        run_id, att.handle, search={"pattern": r"^ok 9\d\d$", "regex": True, "max_matches": 1000}
    )
    assert regex.trailer is not None and regex.trailer.returned_matches == 99 and regex.trailer.total_matches == 99


def test_forged_handle_is_permission_denied(client: SpillwayClient, run_id: str) -> None:
    client.offload(key(run_id, "mine"), "secret\n")
    other = f"{run_id}-other"
    client.offload(key(other, "theirs"), "not yours\n")
    for handle in ("res_theirs", "res_nope", "../theirs", "out_mine_stdout"):
        with pytest.raises(grpc.RpcError) as caught:
            client.read_tool_output(run_id, handle)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_reason(caught.value) == "invalid_deferred_handle"


def test_idempotent_offload_and_no_overwrite(client: SpillwayClient, run_id: str) -> None:
    first = client.offload(key(run_id, "c"), b"same bytes\n")
    again = client.offload(key(run_id, "c"), b"same bytes\n")
    assert again == first
    with pytest.raises(grpc.RpcError) as caught:
        client.offload(key(run_id, "c"), b"other bytes\n")
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert client.read_tool_output(run_id, "res_c", bytes={"offset": 0}).data == b"same bytes\n"


def test_json_binary_header_options_and_run_operations(client: SpillwayClient, run_id: str) -> None:
    att = client.offload(key(run_id, "j"), {"id": 7, "items": [1, 2, 3]})
    assert att.content_type == "application/json"
    assert att.size_bytes == len(b'{"id":7,"items":[1,2,3]}')
    assert att.preview.shape != ""
    blob = bytes(range(256)) * 10
    b = client.offload(key(run_id, "bin"), blob, slot="value", expected_size=len(blob), ttl=3600)
    assert b.handle == "out_bin_value" and b.binary and b.expire_time.seconds > 0
    assert client.read_tool_output(run_id, b.handle, bytes={"offset": 256, "limit": 256}).data == bytes(range(256))
    with pytest.raises(grpc.RpcError) as caught:
        client.offload(key(run_id, "bad"), b"abc", expected_sha256="0" * 64)
    assert caught.value.code() == grpc.StatusCode.DATA_LOSS

    for i in range(3):
        client.offload(key(run_id, f"p{i}"), f"{i}\n")
    handles = [a.handle for a in client.list_all(run_id, page_size=2)]
    assert handles == sorted(handles) and set(handles) == {"out_bin_value", "res_j", "res_p0", "res_p1", "res_p2"}
    assert client.fork_run(run_id, f"{run_id}-fork") == 5
    assert client.read_tool_output(f"{run_id}-fork", "res_p1", bytes={"offset": 0}).data == b"1\n"
    assert client.set_run_ttl(run_id, 60).expire_time.seconds > 0
    assert client.delete_run(run_id) == 5
    with pytest.raises(grpc.RpcError) as caught:
        client.stat(run_id, "res_p1")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    info = client.server_info()
    assert info.backend == "memory" and info.caps.max_window_lines > 0


def test_text_with_unpaired_surrogates_is_stored_as_the_ts_sdk_stores_it(client: SpillwayClient, run_id: str) -> None:
    att = client.offload(key(run_id, "text"), UNPAIRED)
    assert client.read_tool_output(run_id, att.handle, bytes={"offset": 0}).data == UNPAIRED_STORED
    att = client.offload(key(run_id, "json"), UNPAIRED_JSON)
    assert client.read_tool_output(run_id, att.handle, bytes={"offset": 0}).data == UNPAIRED_JSON_STORED
    batched = client.offload_batch([(key(run_id, "b-text"), UNPAIRED), (key(run_id, "b-json"), UNPAIRED_JSON)])
    assert [a.size_bytes for a in batched] == [len(UNPAIRED_STORED), len(UNPAIRED_JSON_STORED)]  # type: ignore[union-attr]


async def test_async_text_with_unpaired_surrogates_is_stored_as_the_ts_sdk_stores_it(
    aclient: AsyncSpillwayClient, run_id: str
) -> None:
    # Up to 64 KiB shares an OffloadBatch call; more goes in an Offload stream of its own.
    small, large, value = await asyncio.gather(
        aclient.offload(key(run_id, "small"), UNPAIRED),
        aclient.offload(key(run_id, "large"), UNPAIRED * 5000),
        aclient.offload(key(run_id, "json"), UNPAIRED_JSON),
    )
    assert b"".join([c async for c in aclient.read_bytes(run_id, small.handle)]) == UNPAIRED_STORED
    assert b"".join([c async for c in aclient.read_bytes(run_id, large.handle)]) == UNPAIRED_STORED * 5000
    assert b"".join([c async for c in aclient.read_bytes(run_id, value.handle)]) == UNPAIRED_JSON_STORED


def test_a_client_refused_1500_times_on_one_channel_is_answered_every_time(run_id: str) -> None:
    """Each refusal comes while the payload is still on its way, and grpcio resets such a stream;
    past about 1,000 resets in quick succession nghttp2 (the server's HTTP/2 layer) would close
    the connection with GOAWAY(INTERNAL_ERROR) and lose the calls crossing it, so the server
    answers a connection refused in bulk once each request has ended. No call may be lost."""
    payload = b"x" * (3 << 20)
    answers: collections.Counter[str] = collections.Counter()
    with spillway_server("--max-blob-bytes", str(1 << 20)) as url, SpillwayClient(url) as c:

        def refuse(i: int) -> None:
            try:
                c.offload(key(run_id, f"big-{i}"), payload, timeout=30)
                answers["stored"] += 1
            except grpc.RpcError as err:
                answers[f"{err.code().name}: {re.sub(r'[0-9]+', 'N', err.details() or '')}"] += 1

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(refuse, range(1500)))
        assert dict(answers) == {
            "RESOURCE_EXHAUSTED: payload of header.expected_size N bytes exceeds max_blob_bytes N": 1500
        }
        assert c.offload(key(run_id, "fits"), b"kept\n").size_bytes == 5


async def test_a_payload_over_max_blob_bytes_is_refused_by_its_announced_size(run_id: str) -> None:
    with spillway_server("--max-blob-bytes", "100000") as url:
        with SpillwayClient(url) as sync_client:
            with pytest.raises(grpc.RpcError) as caught:
                sync_client.offload(key(run_id, "big"), b"x" * 150_000)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "expected_size 150000" in (caught.value.details() or "")
        async with AsyncSpillwayClient(url) as async_client:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await async_client.offload(key(run_id, "big-async"), "y" * 150_000)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "expected_size 150000" in (refused.value.details() or "")
            stored = await async_client.offload(key(run_id, "fits"), b"z" * 90_000)
            assert stored.size_bytes == 90_000

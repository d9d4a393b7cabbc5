"""Offload retries through a draining replica, and the read_tool_output tool executor."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from conftest import REPO
from spillway_client import (
    READ_TOOL_OUTPUT_TOOL,
    AsyncSpillwayClient,
    SpillwayClient,
    execute_read_tool_output,
    execute_read_tool_output_async,
)
from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client._gen.spillway.v1 import spillway_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def ts_tool(server_url: str) -> dict:
    """The TS SDK's readToolOutputTool, as the compiled SDK exports it."""
    del server_url  # the session server's setup builds the TypeScript packages
    script = 'import("@spillway/client").then((m) => process.stdout.write(JSON.stringify(m.readToolOutputTool)))'
    out = subprocess.run(["node", "-e", script], cwd=REPO, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class DrainingReplica(pb_grpc.SpillwayServiceServicer):
    """A replica that answers the first `refusals` Offloads UNAVAILABLE (as a draining server
    does) and forwards the rest to the real server."""

    def __init__(self, upstream: SpillwayClient, refusals: int) -> None:
        self.upstream = upstream
        self.refusals = refusals
        self.attempts = 0

    def Offload(
        self, request_iterator: Iterator[pb.OffloadRequest], context: grpc.ServicerContext
    ) -> pb.OffloadResponse:
        self.attempts += 1
        requests = list(request_iterator)
        if self.attempts <= self.refusals:
            context.abort(grpc.StatusCode.UNAVAILABLE, "server is draining")
        return self.upstream.raw.Offload(iter(requests))


@pytest.fixture
def replica(client: SpillwayClient) -> Iterator[tuple[DrainingReplica, str]]:
    servicer = DrainingReplica(client, refusals=1)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_SpillwayServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_offload_of_replayable_data_retries_unavailable(client: SpillwayClient, replica, run_id: str) -> None:
    servicer, target = replica
    payload = b"x" * (3 * 1024 * 1024 + 5)
    with SpillwayClient(target) as via_replica:
        att = via_replica.offload({"tenant": "dev", "run_id": run_id, "call_id": "r"}, payload)
    assert servicer.attempts == 2
    assert att.sha256 == hashlib.sha256(payload).hexdigest()
    assert client.read_tool_output(run_id, "res_r", bytes={"offset": 0}).data == payload


async def test_async_offload_retries_unavailable(replica, run_id: str, client: SpillwayClient) -> None:
    servicer, target = replica
    async with AsyncSpillwayClient(target) as via_replica:
        att = await via_replica.offload({"tenant": "dev", "run_id": run_id, "call_id": "ra"}, "hello\n")
    assert servicer.attempts == 2
    assert client.stat(run_id, "res_ra").sha256 == att.sha256


def test_streamed_offload_is_not_replayed(replica, run_id: str) -> None:
    servicer, target = replica
    with SpillwayClient(target) as via_replica, pytest.raises(grpc.RpcError) as caught:
        via_replica.offload({"tenant": "dev", "run_id": run_id, "call_id": "s"}, iter([b"a", b"b"]))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert servicer.attempts == 1


class StalledReplica(pb_grpc.SpillwayServiceServicer):
    """A replica that holds every Offload and GetServerInfo until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def Offload(self, request_iterator, context):
        self.release.wait()
        context.abort(grpc.StatusCode.UNAVAILABLE, "released")

    def GetServerInfo(self, request, context):
        self.release.wait()
        return pb.GetServerInfoResponse()


@pytest.fixture
def stalled() -> Iterator[tuple[StalledReplica, str]]:
    servicer = StalledReplica()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_SpillwayServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        servicer.release.set()
        server.stop(None)


def test_timeout_is_the_call_deadline(stalled) -> None:
    _, target = stalled
    with SpillwayClient(target) as c:
        with pytest.raises(grpc.RpcError) as caught:
            c.server_info(timeout=0.2)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        with pytest.raises(grpc.RpcError) as caught:
            c.offload({"tenant": "dev", "run_id": "r", "call_id": "c"}, b"data", timeout=0.2)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_async_timeout_is_the_call_deadline(stalled) -> None:
    _, target = stalled
    async with AsyncSpillwayClient(target) as c:
        with pytest.raises(grpc.RpcError) as caught:
            await c.server_info(timeout=0.2)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_tool_definition_is_the_ts_sdks(ts_tool: dict) -> None:
    assert READ_TOOL_OUTPUT_TOOL == ts_tool
    assert READ_TOOL_OUTPUT_TOOL["name"] == "read_tool_output"
    assert READ_TOOL_OUTPUT_TOOL["parameters"]["required"] == ["handle"]


@pytest.mark.parametrize(
    ("args", "window"),
    [
        ({"offset": 5, "limit": 3}, {"lines": pb.LinesWindow(offset=5, limit=3)}),
        ({"offset": 2, "limit": 4, "from_end": True}, {"lines": pb.LinesWindow(offset=2, limit=4, from_end=True)}),
        ({"bytes": True, "offset": 7, "limit": 20}, {"bytes": pb.BytesWindow(offset=7, limit=20)}),
        ({"mode": "bytes", "offset": 7.0}, {"bytes": pb.BytesWindow(offset=7)}),
        (
            {"pattern": "item 1\\d", "regex": True, "context": 1, "skip": 2, "limit": 3},
            {"search": pb.SearchWindow(pattern="item 1\\d", regex=True, context_lines=1, skip=2, max_matches=3)},
        ),
    ],
)
def test_tool_executor_returns_server_rendered_text(client: SpillwayClient, run_id: str, args, window) -> None:
    client.offload({"tenant": "dev", "run_id": run_id, "call_id": "t"}, "".join(f"item {i}\n" for i in range(40)))
    text = execute_read_tool_output(client, run_id, json.dumps({"handle": "res_t", **args}))
    raw = list(client.raw.ReadToolOutput(pb.ReadToolOutputRequest(run_id=run_id, handle="res_t", **window)))
    assert raw[-1].WhichOneof("frame") == "trailer"
    assert text == raw[-1].trailer.rendered
    assert text.startswith("[res_t]")


async def test_async_tool_executor_matches_sync(
    aclient: AsyncSpillwayClient, client: SpillwayClient, run_id: str
) -> None:
    await aclient.offload({"tenant": "dev", "run_id": run_id, "call_id": "u"}, "alpha\nbeta\ngamma\n")
    args = {"handle": "res_u", "pattern": "a", "limit": 2}
    text = await execute_read_tool_output_async(aclient, run_id, args)
    assert text == execute_read_tool_output(client, run_id, args)
    assert "alpha" in text and "beta" in text and "gamma" not in text


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        ("{not json", "error: arguments are not valid JSON"),
        ([1], "error: arguments must be an object with a handle"),
        ({"handle": "res_v", "grep": "x"}, 'error: unknown argument "grep"'),
        ({"handle": ""}, "error: handle must be a non-empty string"),
        ({"handle": "res_v", "offset": -1}, "error: offset must be an integer >= 0"),
        ({"handle": "res_v", "limit": 1.5}, "error: limit must be an integer >= 1"),
        ({"handle": "res_v", "context": 21, "pattern": "a"}, "error: context must be an integer from 0 to 20"),
        ({"handle": "res_v", "from_end": "yes"}, "error: from_end must be true or false"),
        ({"handle": "res_v", "mode": "search"}, 'error: mode must be "lines", "bytes" or "json"'),
        (
            {"handle": "res_v", "pattern": "a", "offset": 3},
            "error: pattern cannot be combined with bytes, from_end or offset (use skip to page matches)",
        ),
        ({"handle": "res_v", "skip": 2}, "error: skip needs a pattern"),
        ({"handle": "res_v", "bytes": True, "from_end": True}, "error: from_end applies to lines, not bytes"),
    ],
)
def test_tool_executor_answers_bad_arguments_in_one_line(
    client: SpillwayClient, run_id: str, args, answer: str
) -> None:
    assert execute_read_tool_output(client, run_id, args) == answer


def test_tool_executor_reports_refusals(client: SpillwayClient, run_id: str) -> None:
    text = execute_read_tool_output(client, run_id, {"handle": "res_forged"})
    assert text.startswith("error: invalid_deferred_handle: ")
    assert "\n" not in text


class RecordingClient:
    """Passes read_tool_output on to a real client and records the search windows it sends."""

    def __init__(self, client: SpillwayClient) -> None:
        self.client = client
        self.searches: list[dict] = []
        self.windows: list[tuple[dict, list[str]]] = []

    def read_tool_output(self, run_id: str, handle: str, **kwargs):
        if "search" in kwargs:
            self.searches.append(kwargs["search"])
        window = self.client.read_tool_output(run_id, handle, **kwargs)
        self.windows.append((kwargs, [f.WhichOneof("frame") for f in window.frames]))
        return window


def test_tool_executor_asks_for_the_rendered_text_only(client: SpillwayClient, run_id: str) -> None:
    log = "".join(f"ERROR step {i + 1}\n" if i % 50 == 0 else f"ok step {i + 1}\n" for i in range(300))
    client.offload({"tenant": "dev", "run_id": run_id, "call_id": "only"}, log)
    recording = RecordingClient(client)
    executor_client: SpillwayClient = recording  # type: ignore[assignment]
    lines = execute_read_tool_output(executor_client, run_id, {"handle": "res_only", "offset": 40, "limit": 20})
    search = execute_read_tool_output(executor_client, run_id, {"handle": "res_only", "pattern": "ERROR"})
    assert [kwargs.get("rendered_only") for kwargs, _ in recording.windows] == [True, True]
    assert [frames for _, frames in recording.windows] == [["header", "trailer"], ["header", "trailer"]]
    assert lines == client.read_tool_output(run_id, "res_only", lines={"offset": 40, "limit": 20}).rendered
    assert search == client.read_tool_output(run_id, "res_only", search={"pattern": "ERROR"}).rendered


def test_tool_executor_pages_a_search_by_cursor(client: SpillwayClient, run_id: str) -> None:
    log = "".join(f"ERROR step {i + 1}\n" if i % 50 == 0 else f"ok step {i + 1}\n" for i in range(300))
    client.offload({"tenant": "dev", "run_id": run_id, "call_id": "page"}, log)
    recording = RecordingClient(client)
    args = {"handle": "res_page", "pattern": "ERROR", "context": 2, "limit": 2}
    executor_client: SpillwayClient = recording  # type: ignore[assignment]
    pages = [execute_read_tool_output(executor_client, run_id, {**args, "skip": skip}) for skip in (0, 2, 4)]
    afters = [s.get("after") for s in recording.searches]
    assert afters[0] is None
    assert (afters[1].line, afters[1].matches_before) == (50, 1)
    assert (afters[2].line, afters[2].matches_before) == (150, 3)
    for skip, page in zip((0, 2, 4), pages, strict=True):
        window = pb.SearchWindow(pattern="ERROR", context_lines=2, max_matches=2, skip=skip)
        raw = list(client.raw.ReadToolOutput(pb.ReadToolOutputRequest(run_id=run_id, handle="res_page", search=window)))
        assert page == raw[-1].trailer.rendered
    assert "ERROR step 201" in pages[2]
    # Going back, or another pattern, reads without the cursor.
    execute_read_tool_output(executor_client, run_id, {**args, "skip": 0})
    execute_read_tool_output(executor_client, run_id, {**args, "pattern": "ok", "skip": 4})
    assert [s.get("after") for s in recording.searches[3:]] == [None, None]


def test_tool_executor_pages_right_after_the_handle_is_reused(client: SpillwayClient, run_id: str) -> None:
    # Lines of one length: a cursor remembered for the first payload starts a line in the second.
    def payload(every: int) -> str:
        return "".join(("ERROR %03d\n" if i % every == 0 else "fine  %03d\n") % i for i in range(400))

    key = {"tenant": "dev", "run_id": run_id, "call_id": "reused"}
    args = {"handle": "res_reused", "pattern": "ERROR", "limit": 3}
    client.offload(key, payload(2))
    assert execute_read_tool_output(client, run_id, args).endswith("[more matches: skip=3]\n")
    client.delete_run(run_id)
    client.offload(key, payload(5))
    page = execute_read_tool_output(client, run_id, {**args, "skip": 3})
    window = client.read_tool_output(run_id, "res_reused", search={"pattern": "ERROR", "max_matches": 3, "skip": 3})
    assert page == window.rendered
    assert "    16:\tERROR 015" in page

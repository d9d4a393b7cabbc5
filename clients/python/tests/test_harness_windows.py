"""The windowed pydantic-ai read tool: bytes each model read moves, by the server's own counter.

A tool returns a log of over 50 MB; ToolOutputLimits spills it to Spillway; a FunctionModel
reads windows back. Between model turns the test scrapes `spillway_bytes_out_total` from the
server's metrics endpoint, so each read's cost is what the server sent, not what the client says.
"""

from __future__ import annotations

import itertools
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from agent_script import MALFORMED_READS, read_calls, returns
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.tool_output_limits import ToolOutputLimits

from conftest import spillway_server
from nginx_proxy import free_port
from spillway_client import AsyncSpillwayClient
from spillway_client.harness import SpillwayOverflowStore, spillway_tool_output_limits

LINES = 1_200_000


def step(n: int) -> str:
    """Line n (from 1) of the log."""
    return f"build step {n}: compiled module_{(n - 1) % 977}.o ok"


BIG_LOG = "".join(f"{step(n)}\n" for n in range(1, LINES + 1))
HANDLE = re.compile(r"stored to handle '([^']+)'")
PER_READ_OVERHEAD = 256
"""Bytes a read may move beyond the text the model is shown (the counter counts that text exactly)."""


@pytest.fixture(scope="module")
def metered() -> Iterator[tuple[str, str]]:
    """A server with its Prometheus endpoint on; yields (gRPC URL, metrics URL)."""
    port = free_port()
    with spillway_server("--metrics-port", str(port)) as url:
        yield url, f"http://127.0.0.1:{port}/metrics"


def bytes_out(metrics_url: str) -> int:
    """The server's spillway_bytes_out_total: bytes-mode data plus rendered window text sent."""
    with urllib.request.urlopen(metrics_url, timeout=10) as res:
        text = res.read().decode()
    match = re.search(r"^spillway_bytes_out_total (\S+)$", text, re.MULTILINE)
    assert match is not None, text[:2000]
    return int(float(match.group(1)))


def metered_reader(tool: str, reads: list[dict[str, Any]], metrics_url: str, moved: list[int]):
    """A model that dumps the log, then makes each read in its own turn, scraping the counter around it."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        dumped = returns(messages, "dump_big_log")
        if not dumped:
            return ModelResponse(parts=[ToolCallPart("dump_big_log", {}, tool_call_id="call-dump")])
        done = len(returns(messages, tool))
        moved.append(bytes_out(metrics_url))
        if done == len(reads):
            return ModelResponse(parts=[TextPart("done")])
        handle = HANDLE.search(str(dumped[0].content)).group(1)  # type: ignore[union-attr]
        return ModelResponse(parts=[ToolCallPart(tool, {"handle": handle, **reads[done]}, tool_call_id=f"r{done}")])

    return model


async def run_reads(capability: ToolOutputLimits[Any], tool: str, reads: list[dict[str, Any]], metrics_url: str):
    """Runs the agent; returns what each read showed the model and the bytes the server sent for it."""
    moved: list[int] = []
    agent = Agent(FunctionModel(metered_reader(tool, reads, metrics_url, moved)), capabilities=[capability])

    @agent.tool_plain
    def dump_big_log() -> str:
        """Return the whole build log."""
        return BIG_LOG

    result = await agent.run("build it")
    assert result.output == "done"
    shown = [str(p.content) for p in returns(result.all_messages(), tool)]
    return shown, [b - a for a, b in itertools.pairwise(moved)]


READS: list[dict[str, Any]] = [
    {"offset": 999_999, "limit": 3},
    {"offset": 0, "limit": 2, "from_end": True},
    {"pattern": "module_976.o ok", "limit": 2},
]


async def test_each_windowed_read_moves_its_window_not_the_payload(metered: tuple[str, str]) -> None:
    url, metrics_url = metered
    size = len(BIG_LOG.encode())
    assert size >= 50_000_000
    async with AsyncSpillwayClient(url) as client:
        # Before: the harness's read_tool_result over SpillwayOverflowStore downloads the payload.
        limits = ToolOutputLimits(store=SpillwayOverflowStore(client, run_id="whole"))
        whole_shown, whole_moved = await run_reads(limits, "read_tool_result", READS[:1], metrics_url)
        assert whole_shown[0].splitlines()[1:] == [step(n) for n in (1_000_000, 1_000_001, 1_000_002)]
        assert whole_moved[0] >= size

        # After: read_tool_output, one ReadToolOutput window per read.
        shown, moved = await run_reads(spillway_tool_output_limits(client), "read_tool_output", READS, metrics_url)
    assert shown[0].splitlines() == [
        f"[res_call-dump.0] lines 1000000-1000002 of {LINES} ({size} bytes)",
        *(f"{n}\t{step(n)}" for n in (1_000_000, 1_000_001, 1_000_002)),
        "[more: offset=1000002]",
    ]
    assert shown[1].splitlines()[1:] == [
        *(f"{n}\t{step(n)}" for n in (LINES - 1, LINES)),
        "[earlier lines: offset=2 from_end=true]",
    ]
    assert [line.strip() for line in shown[2].splitlines()[1:3]] == [f"977:\t{step(977)}", f"1954:\t{step(1954)}"]
    assert len(moved) == len(READS)
    for text, sent in zip(shown, moved, strict=True):
        assert 0 < sent <= len(text.encode()) + PER_READ_OVERHEAD, (sent, text)
    print(f"\nbytes out per read: whole download {whole_moved[0]}, windows {moved} (payload {size})")


def windowed_reader(calls: list[Any]):
    """A model that calls a 20 KB tool, then read_tool_output with each call's arguments in one turn.

    `{handle}` in an argument is replaced by the handle the preview showed.
    """

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        dumped = returns(messages, "dump_small_log")
        if not dumped:
            return ModelResponse(parts=[ToolCallPart("dump_small_log", {}, tool_call_id="call-small")])
        if returns(messages, "read_tool_output"):
            return ModelResponse(parts=[TextPart("done")])
        handle = HANDLE.search(str(dumped[0].content)).group(1)  # type: ignore[union-attr]
        return read_calls(handle, calls, "w")

    return model


async def windowed_answers(capability: ToolOutputLimits[Any], calls: list[Any]) -> tuple[str, list[str]]:
    """Runs the agent; returns the preview the model saw and each read's answer, in call order."""
    agent = Agent(FunctionModel(windowed_reader(calls)), capabilities=[capability])

    @agent.tool_plain
    def dump_small_log() -> str:
        """Return a short build log."""
        return "".join(f"{step(n)}\n" for n in range(1, 501))

    result = await agent.run("build it")
    assert result.output == "done"
    messages = result.all_messages()
    by_id = {p.tool_call_id: str(p.content) for p in returns(messages, "read_tool_output")}
    return str(returns(messages, "dump_small_log")[0].content), [by_id[f"w{i}"] for i in range(len(calls))]


async def test_read_tool_output_takes_the_previews_handle_and_the_servers(
    aclient: AsyncSpillwayClient, run_id: str
) -> None:
    calls: list[dict[str, Any]] = [
        # What the harness's preview tells the model to call, defaults spelled out.
        {"handle": "{handle}", "offset": 0, "limit": 2, "from_end": False, "pattern": None},
        # The bare handle the server's windows name.
        {"handle": "res_call-small.0", "offset": 498},
        {"handle": "{handle}", "pattern": "module_7.o", "offset": 0, "from_end": False, "skip": 0},
        {"handle": "{handle}", "bytes": True, "offset": 0, "limit": 10, "from_end": False},
        {"handle": "other-run/res_call-small.0"},
        {"handle": "{handle}", "offset": -1},
    ]
    preview, got = await windowed_answers(spillway_tool_output_limits(aclient), calls)
    handle = HANDLE.search(preview).group(1)  # type: ignore[union-attr]
    run, _, bare = handle.rpartition("/")
    assert bare == "res_call-small.0"
    # The harness's preview names the windowed tool, not its own read_tool_result.
    assert f"Read it with read_tool_output(handle={handle!r}" in preview
    # Every answer is the server's text for the same window read through the client.
    expected = [
        (await aclient.read_tool_output(run, bare, lines={"offset": 0, "limit": 2})).rendered,
        (await aclient.read_tool_output(run, bare, lines={"offset": 498})).rendered,
        (await aclient.read_tool_output(run, bare, search={"pattern": "module_7.o"})).rendered,
        (await aclient.read_tool_output(run, bare, bytes={"offset": 0, "limit": 10})).rendered,
    ]
    assert got[:4] == expected
    assert [line.strip() for line in got[1].splitlines()[1:3]] == [f"499\t{step(499)}", f"500\t{step(500)}"]
    # Another run's handle is the server's refusal, one line, not a read.
    assert got[4].startswith("error: ") and "\n" not in got[4]
    assert got[5] == "error: offset must be an integer >= 0"

    # With run_id pinned the preview's handle is the server's own, and other runs' are refused.
    preview, got = await windowed_answers(
        spillway_tool_output_limits(aclient, run_id=run_id),
        [{"handle": "{handle}", "limit": 1}, {"handle": "x/res_call-small.0"}],
    )
    assert "stored to handle 'res_call-small.0'" in preview
    assert got[0] == (await aclient.read_tool_output(run_id, "res_call-small.0", lines={"limit": 1})).rendered
    assert got[1].startswith("error: ")


async def test_malformed_reads_are_answered_with_one_error_line(aclient: AsyncSpillwayClient) -> None:
    """The windowed tool answers arguments that are not an object of known arguments as the SDK's
    tool does, in one line, and the agent run goes on."""
    _, got = await windowed_answers(spillway_tool_output_limits(aclient), [args for args, _ in MALFORMED_READS])
    assert got == [line for _, line in MALFORMED_READS]


async def test_read_tool_output_never_reads_another_agent_runs_spill(aclient: AsyncSpillwayClient) -> None:
    """The run comes from the runtime, never from the model: a second agent run of the same agent
    that names the first run's handle (`<run>/res_<call>`) gets the server's refusal, not its bytes."""
    capability = spillway_tool_output_limits(aclient)
    preview, _ = await windowed_answers(capability, [{"handle": "{handle}", "limit": 1}])
    first = HANDLE.search(preview).group(1)  # type: ignore[union-attr]
    _, got = await windowed_answers(capability, [{"handle": first, "limit": 1}])
    assert got[0].startswith("error: invalid_deferred_handle: "), got[0]

"""End to end: Spillway as the OverflowStore of pydantic-ai-harness's ToolOutputLimits.

A tool returns several MB; the agent (driven by FunctionModel, no network) sees a preview and a
handle; the model reads windows back with read_tool_result; the bytes that went through gRPC
are the tool's bytes.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from agent_script import returns
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.tool_output_limits import LocalFileStore, OverflowStore, ToolOutputLimits

from conftest import spillway_server
from spillway_client import AsyncSpillwayClient
from spillway_client.harness import SpillwayOverflowStore

LOG = "".join(f"build step {i + 1}: compiled module_{i % 977}.o\n" for i in range(120_000))
HANDLE = re.compile(r"stored to handle '([^']+)'")


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the big tool, then reads a deep window and a search through the handle it was shown."""
    dumped = returns(messages, "dump_build_log")
    if not dumped:
        return ModelResponse(parts=[ToolCallPart("dump_build_log", {}, tool_call_id="call-dump")])
    reads = returns(messages, "read_tool_result")
    if not reads:
        match = HANDLE.search(str(dumped[0].content))
        assert match is not None, dumped[0].content
        handle = match.group(1)
        return ModelResponse(
            parts=[
                ToolCallPart("read_tool_result", {"handle": handle, "offset": 99_999, "limit": 3}, tool_call_id="r1"),
                ToolCallPart(
                    "read_tool_result", {"handle": handle, "pattern": "module_976.o", "limit": 2}, tool_call_id="r2"
                ),
                ToolCallPart("read_tool_result", {"handle": "other-run/res_call-dump"}, tool_call_id="r3"),
            ]
        )
    return ModelResponse(parts=[TextPart("done")])


async def test_agent_spills_to_spillway_and_reads_windows_back(aclient: AsyncSpillwayClient) -> None:
    store = SpillwayOverflowStore(aclient)
    assert isinstance(store, OverflowStore)
    agent = Agent(FunctionModel(scripted_model), capabilities=[ToolOutputLimits(store=store)])

    @agent.tool_plain
    def dump_build_log() -> str:
        """Return the whole build log."""
        return LOG

    result = await agent.run("build it")
    messages = result.all_messages()
    assert result.output == "done"
    assert len(LOG.encode()) > 4_000_000

    shown = returns(messages, "dump_build_log")[0]
    text = str(shown.content)
    assert len(text) < 5_000
    assert "build step 1: compiled module_0.o" in text
    assert "build step 120000: compiled module_805.o" in text
    handle = HANDLE.search(text).group(1)  # type: ignore[union-attr]
    run, _, spillway_handle = handle.rpartition("/")
    assert spillway_handle.startswith("res_call-dump")
    assert shown.metadata["overflow_handle"] == handle

    reads = {part.tool_call_id: str(part.content) for part in returns(messages, "read_tool_result")}
    assert reads["r1"].splitlines()[1:] == [
        "build step 100000: compiled module_345.o",
        "build step 100001: compiled module_346.o",
        "build step 100002: compiled module_347.o",
    ]
    assert reads["r2"].splitlines()[1:] == [
        "build step 977: compiled module_976.o",
        "build step 1954: compiled module_976.o",
    ]
    assert reads["r3"].startswith("[No stored tool result for handle 'other-run/res_call-dump'")

    # The spill lives in Spillway: its record and the bytes read back over gRPC are the tool's.
    digest = hashlib.sha256(LOG.encode()).hexdigest()
    record = await aclient.stat(run, spillway_handle)
    assert record.sha256 == digest and record.size_bytes == len(LOG.encode())
    assert hashlib.sha256(await store.read(handle)).hexdigest() == digest
    window = await aclient.read_tool_output(run, spillway_handle, lines={"offset": 99_999, "limit": 1})
    assert "build step 100000: compiled module_345.o" in window.rendered


async def test_store_keeps_a_rewritten_key_as_its_next_attempt(aclient: AsyncSpillwayClient, run_id: str) -> None:
    """A run replayed into a pinned Spillway run writes the harness's keys again: other bytes become
    the call's next attempt instead of failing the spill, the same bytes the same handle."""
    store = SpillwayOverflowStore(aclient, run_id=run_id)
    first = await store.write("agent-run/call-1.0", b"first run\n")
    same = await store.write("agent-run/call-1.0", b"first run\n")
    second = await store.write("agent-run/call-1.0", b"replayed run\n")
    assert (first, same, second) == ("res_call-1.0", "res_call-1.0", "res@2_call-1.0")
    assert await store.read(first) == b"first run\n"
    assert await store.read(second) == b"replayed run\n"
    unpinned = SpillwayOverflowStore(aclient)
    assert await unpinned.write(f"{run_id}-own/call-1.0", b"a\n") == f"{run_id}-own/res_call-1.0"
    again = await unpinned.write(f"{run_id}-own/call-1.0", b"b\n")
    assert again == f"{run_id}-own/res@2_call-1.0" and await unpinned.read(again) == b"b\n"


async def test_store_refuses_foreign_and_malformed_handles(aclient: AsyncSpillwayClient, run_id: str) -> None:
    store = SpillwayOverflowStore(aclient)
    handle = await store.write(f"{run_id}/call-1.0", b"payload\n")
    assert handle == f"{run_id}/res_call-1.0"
    assert await store.read(handle) == b"payload\n"
    with pytest.raises(PermissionError):
        await store.read(f"{run_id}-other/res_call-1.0")
    with pytest.raises(PermissionError):
        await store.read(f"{run_id}/res_call-2.0")
    with pytest.raises(FileNotFoundError):
        await store.read("res_call-1.0")

    pinned = SpillwayOverflowStore(aclient, run_id=f"{run_id}-pinned")
    pinned_handle = await pinned.write("agent-run/call-9.0.content", b"\x00\x01binary\xff")
    assert pinned_handle == "res_call-9.0.content"
    assert await pinned.read(pinned_handle) == b"\x00\x01binary\xff"
    with pytest.raises(PermissionError):
        await pinned.read(handle)


INVENTED_HANDLES = [
    "../c.0",
    "./res_x",
    "a\\b/res_x",
    "r" * 300 + "/res_x",
    "run/" + "h" * 5000,
    "",
    "/",
    "run/",
    "run\n/res_x",
    "run/res_\x1b[31mx",
    "run/res_\x7f",
    "res_x",
]
"""Handles a model might invent: traversal, separators, over-long parts, empty, control characters."""


def reading(handles: list[str]):
    """A model that calls read_tool_result once with each handle, in one turn, then ends."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages, "read_tool_result"):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("read_tool_result", {"handle": h, "limit": 5}, tool_call_id=f"h{i}")
                for i, h in enumerate(handles)
            ]
        )

    return model


async def answers(store: OverflowStore, handles: list[str]) -> dict[str, str]:
    """Runs an agent whose model reads each handle; returns what the tool answered, by handle."""
    agent = Agent(FunctionModel(reading(handles)), capabilities=[ToolOutputLimits(store=store)])
    result = await agent.run("read them")
    assert result.output == "done"
    got = {part.tool_call_id: str(part.content) for part in returns(result.all_messages(), "read_tool_result")}
    return {h: got[f"h{i}"] for i, h in enumerate(handles)}


def guidance(handle: str) -> str:
    return (
        f"[No stored tool result for handle {handle!r}. Use the exact handle string from a "
        '"[Tool output too large ... stored to handle ...]" marker; if the result is no longer '
        "available, re-run the original tool.]"
    )


@pytest.mark.parametrize("pinned", [False, True])
async def test_invented_handles_get_the_harness_guidance(
    aclient: AsyncSpillwayClient, run_id: str, tmp_path, pinned: bool
) -> None:
    store = SpillwayOverflowStore(aclient, run_id=run_id if pinned else None)
    await store.write(f"{run_id}/call-1.0", b"stored\n")
    got = await answers(store, INVENTED_HANDLES)
    # The harness's own LocalFileStore answers these handles with its guidance line; so does Spillway.
    local = await answers(LocalFileStore(base_dir=tmp_path / "spills"), INVENTED_HANDLES)
    for handle in INVENTED_HANDLES:
        assert got[handle] == guidance(handle), handle
        assert local[handle] == guidance(handle), handle
    # A lone surrogate cannot be encoded into a request (nor, by pydantic-ai, into a tool call);
    # read still raises the OSError the harness answers with its guidance.
    with pytest.raises(FileNotFoundError):
        await store.read("run\ud800/res_x" if not pinned else "res_\ud800")


async def test_refused_handles_get_the_harness_guidance(aclient: AsyncSpillwayClient, run_id: str) -> None:
    store = SpillwayOverflowStore(aclient)
    handle = await store.write(f"{run_id}/call-1.0", b"stored\n")
    await aclient.delete_run(run_id)
    refused = [handle, f"{run_id}/res_never-written", "other-run/res_call-1.0"]
    got = await answers(store, refused)
    assert got == {h: guidance(h) for h in refused}


async def test_unreachable_service_gets_the_harness_guidance(run_id: str) -> None:
    with spillway_server() as url:
        async with AsyncSpillwayClient(url) as client:
            store = SpillwayOverflowStore(client)
            handle = await store.write(f"{run_id}/call-1.0", b"stored\n")
    # The server is stopped: the model's read of the handle it was shown is answered, not raised.
    async with AsyncSpillwayClient(url) as client:
        got = await answers(SpillwayOverflowStore(client, timeout=5), [handle, "../c.0"])
    assert got == {handle: guidance(handle), "../c.0": guidance("../c.0")}


async def test_unauthenticated_reads_get_the_harness_guidance(tmp_path, run_id: str) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{hashlib.sha256(b'right-token').hexdigest()} acme\n")
    with spillway_server("--token-file", str(tokens)) as url:
        async with AsyncSpillwayClient(url, token="right-token") as client:
            handle = await SpillwayOverflowStore(client, tenant="acme").write(f"{run_id}/call-1.0", b"stored\n")
        async with AsyncSpillwayClient(url, token="wrong-token") as client:
            got = await answers(SpillwayOverflowStore(client, tenant="acme"), [handle])
    assert got == {handle: guidance(handle)}

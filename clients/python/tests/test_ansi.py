"""Terminal escape sequences: the Python SDK strips them by the rules the server and the TS SDK
use (the shared vectors), and passes keep_ansi through its read API and model tool."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from spillway_client import SpillwayClient, execute_read_tool_output, model_text, strip_ansi
from spillway_client.model_text import MAX_SEQUENCE_CHARS, has_ansi

VECTORS_FILE = Path(__file__).resolve().parents[3] / "conformance" / "ansi-strip-vectors.json"
VECTORS: list[dict[str, Any]] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))["vectors"]

RED = "\x1b[31m{}\x1b[0m"


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_strip_vector(vector: dict[str, Any]) -> None:
    assert strip_ansi(vector["input"]) == vector["stripped"]
    assert model_text(vector["input"]) == vector["stripped"]
    assert model_text(vector["input"], keep_ansi=True) == vector["input"]
    assert strip_ansi(vector["stripped"]) == vector["stripped"]


def test_text_without_introducers_is_returned_as_is() -> None:
    text = "plain \t\r\x85 text"
    assert not has_ansi(text)
    assert strip_ansi(text) is text


def test_an_unterminated_osc_removes_at_most_one_cap() -> None:
    tail = "y" * 1_000_000
    assert len(strip_ansi("\x1b]0;" + tail)) == len(tail) + 4 - MAX_SEQUENCE_CHARS


def _line_texts(window: Any) -> list[str]:
    return [
        line.text
        for frame in window.frames
        if frame.WhichOneof("frame") == "content" and frame.content.WhichOneof("body") == "lines"
        for line in frame.content.lines.lines
    ]


def _offload(client: SpillwayClient, text: str) -> tuple[str, str]:
    run_id = f"ansi-{uuid.uuid4().hex[:12]}"
    att = client.offload({"tenant": "dev", "run_id": run_id, "call_id": "log"}, text.encode())
    return run_id, att.handle


def test_read_api_strips_by_default_and_keeps_on_request(client: SpillwayClient) -> None:
    text = RED.format("ERROR") + " disk full\nok\n"
    run_id, handle = _offload(client, text)
    window = client.read_tool_output(run_id, handle)
    assert _line_texts(window) == ["ERROR disk full", "ok"]
    kept = client.read_tool_output(run_id, handle, keep_ansi=True)
    assert _line_texts(kept) == [RED.format("ERROR") + " disk full", "ok"]
    raw = client.read_tool_output(run_id, handle, bytes={"offset": 0})
    assert raw.data == text.encode()
    assert "\x1b" not in raw.rendered


def test_model_tool_takes_keep_ansi(client: SpillwayClient) -> None:
    run_id, handle = _offload(client, RED.format("ERROR") + " disk full\nok\n")
    assert "     1\tERROR disk full\n" in execute_read_tool_output(client, run_id, {"handle": handle})
    kept = execute_read_tool_output(client, run_id, {"handle": handle, "keep_ansi": True})
    assert f"     1\t{RED.format('ERROR')} disk full\n" in kept
    found = execute_read_tool_output(client, run_id, {"handle": handle, "pattern": "ERROR disk"})
    assert "     1:\tERROR disk full\n" in found
    none = execute_read_tool_output(client, run_id, {"handle": handle, "pattern": "ERROR disk", "keep_ansi": True})
    assert "no matches" in none
    assert execute_read_tool_output(client, run_id, {"handle": handle, "keep_ansi": "yes"}) == (
        "error: keep_ansi must be true or false"
    )


COLOURED_LOG = "".join(f"\x1b[32mtest {n}\x1b[0m: ok\n" for n in range(1, 2_001))


async def _run_capability(capability: Any) -> tuple[str, str]:
    """Runs an agent whose tools return a small and a large coloured text; returns what the model saw."""
    from agent_script import returns
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not returns(messages, "run_tests"):
            return ModelResponse(parts=[ToolCallPart("run_tests", {}, tool_call_id="t"), ToolCallPart("status", {})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def run_tests() -> str:
        """Run the test suite."""
        return COLOURED_LOG

    @agent.tool_plain
    def status() -> str:
        """A short status line."""
        return RED.format("degraded") + " 1 service down"

    messages = (await agent.run("test it")).all_messages()
    return str(returns(messages, "run_tests")[0].content), str(returns(messages, "status")[0].content)


async def test_pydantic_ai_capability_shows_text_without_colour_codes(aclient: Any, run_id: str) -> None:
    from spillway_client.pydantic_ai import SpillwayToolOutputs

    shown, status = await _run_capability(SpillwayToolOutputs(aclient, run_id=run_id, over_chars=1_000))
    assert status == "degraded 1 service down"
    assert "\x1b" not in shown and "test 1: ok\ntest 2: ok\n" in shown
    # The stored output is the tool's return as given.
    record = await aclient.stat(run_id, "res_t")
    assert record.size_bytes == len(COLOURED_LOG.encode())

    kept_run = f"{run_id}-kept"
    shown, status = await _run_capability(
        SpillwayToolOutputs(aclient, run_id=kept_run, over_chars=1_000, keep_ansi=True)
    )
    assert status == RED.format("degraded") + " 1 service down"
    assert "\x1b[32mtest 1\x1b[0m: ok\n" in shown


async def test_pydantic_ai_capability_with_a_policy_shows_text_without_colour_codes(aclient: Any, run_id: str) -> None:
    from spillway_client.elision_policy import Band, ElisionPolicy
    from spillway_client.pydantic_ai import SpillwayToolOutputs

    policy = ElisionPolicy(bands=[Band("passthrough", up_to=1_000), Band("spill")])
    shown, status = await _run_capability(SpillwayToolOutputs(aclient, run_id=run_id, policy=policy))
    assert status == "degraded 1 service down"
    assert "\x1b" not in shown and "test 1: ok\ntest 2: ok\n" in shown


async def test_a_refused_spill_under_a_policy_is_shown_without_colour_codes(run_id: str) -> None:
    from conftest import spillway_server
    from spillway_client import AsyncSpillwayClient
    from spillway_client.elision_policy import Band, ElisionPolicy
    from spillway_client.pydantic_ai import SpillwayToolOutputs

    policy = ElisionPolicy(bands=[Band("passthrough", up_to=1_000), Band("spill")])
    with spillway_server("--max-blob-bytes", "1000") as url:
        async with AsyncSpillwayClient(url) as client:
            shown, _ = await _run_capability(SpillwayToolOutputs(client, run_id=run_id, over_chars=100, policy=policy))
    assert "\x1b" not in shown and shown.startswith("test 1: ok\ntest 2: ok\n")
    assert "it could not be stored" in shown

"""SpillwayToolOutputs end to end with pydantic-ai-slim alone (no harness): a FunctionModel calls
a tool returning a large log, is shown the server's preview, and reads windows back with
read_tool_output, each answer the server's text for that window."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from dataclasses import dataclass
from typing import Any

from agent_script import MALFORMED_READS, read_calls, returns
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from conftest import spillway_process, spillway_server
from spillway_client import AsyncSpillwayClient
from spillway_client.pydantic_ai import DEFAULT_TIMEOUT, SpillwayToolOutputs

LOG = "".join(f"test {n}: {'FAIL' if n % 5000 == 0 else 'ok'}\n" for n in range(1, 200_001))
HANDLE = re.compile(r"\b(res_[A-Za-z0-9._%-]+)")


def scripted(reads: list[Any]):
    """Calls run_tests and a small tool; then every read in one turn (`{handle}` from the preview); then ends."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        ran = returns(messages, "run_tests")
        if not ran:
            return ModelResponse(
                parts=[ToolCallPart("run_tests", {}, tool_call_id="call-tests"), ToolCallPart("status", {})]
            )
        if returns(messages, "read_tool_output"):
            return ModelResponse(parts=[TextPart("done")])
        match = HANDLE.search(str(ran[0].content))
        handle = match.group(1) if match else "res_not-shown"
        return read_calls(handle, reads, "r")

    return model


async def run(capability: SpillwayToolOutputs, reads: list[Any]) -> tuple[str, str, list[str]]:
    """Runs the agent; returns the run_tests text, the status text and each read's answer."""
    agent = Agent(FunctionModel(scripted(reads)), capabilities=[capability])

    @agent.tool_plain
    def run_tests() -> str:
        """Run the test suite."""
        return LOG

    @agent.tool_plain
    def status() -> str:
        """A short status line."""
        return "all services up"

    result = await agent.run("test it")
    assert result.output == "done"
    messages = result.all_messages()
    by_id = {p.tool_call_id: str(p.content) for p in returns(messages, "read_tool_output")}
    return (
        str(returns(messages, "run_tests")[0].content),
        str(returns(messages, "status")[0].content),
        [by_id[f"r{i}"] for i in range(len(reads))],
    )


async def test_large_returns_are_offloaded_and_read_in_server_windows(
    aclient: AsyncSpillwayClient, run_id: str
) -> None:
    reads: list[dict[str, Any]] = [
        {"handle": "{handle}", "offset": 4998, "limit": 3},
        {"handle": "{handle}", "pattern": "FAIL", "limit": 2, "skip": 1},
        {"handle": "{handle}", "from_end": True, "limit": 1, "pattern": None},
        {"handle": "res_never-made"},
        {"handle": "{handle}", "pattern": ""},
    ]
    shown, status, got = await run(SpillwayToolOutputs(aclient, run_id=run_id), reads)
    handle = HANDLE.search(shown).group(1)  # type: ignore[union-attr]
    assert handle == "res_call-tests"
    record = await aclient.stat(run_id, handle)
    assert record.size_bytes == len(LOG.encode())
    # The model is shown the server's own preview of the stored output, and small returns pass.
    assert shown == record.preview.text and len(shown) < 5_000
    assert status == "all services up"
    assert got[0] == (await aclient.read_tool_output(run_id, handle, lines={"offset": 4998, "limit": 3})).rendered
    assert [line.strip() for line in got[0].splitlines()[1:4]] == [
        "4999\ttest 4999: ok",
        "5000\ttest 5000: FAIL",
        "5001\ttest 5001: ok",
    ]
    search = {"pattern": "FAIL", "max_matches": 2, "skip": 1}
    assert got[1] == (await aclient.read_tool_output(run_id, handle, search=search)).rendered
    assert "test 10000: FAIL" in got[1] and "test 15000: FAIL" in got[1] and "test 5000: FAIL" not in got[1]
    assert got[2].splitlines()[1].strip() == "200000\ttest 200000: FAIL"
    assert got[3].startswith("error: ") and "\n" not in got[3]
    assert got[4] == "error: pattern must be a non-empty string"


async def test_malformed_reads_are_answered_with_one_error_line(aclient: AsyncSpillwayClient, run_id: str) -> None:
    """Arguments that are not an object of known arguments (JSON text of a string or a list, text
    that is not JSON, an argument named `ctx`) reach the SDK's own checks: the model is told in
    one line and the agent run goes on."""
    _, _, got = await run(SpillwayToolOutputs(aclient, run_id=run_id), [args for args, _ in MALFORMED_READS])
    assert got == [line for _, line in MALFORMED_READS]


async def test_a_return_with_unpaired_surrogates_is_offloaded_as_the_ts_sdk_would(
    aclient: AsyncSpillwayClient, run_id: str
) -> None:
    """A str return holding a lone surrogate (os.fsdecode of a file name that is not UTF-8) is
    stored with U+FFFD in its place, as the TS SDK's UTF-8 encoding stores it; the run goes on."""
    name = os.fsdecode(b"report-\xff.csv")
    listing = "".join(f"{name} {i}\n" for i in range(2000))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages, "list_dir"):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("list_dir", {}, tool_call_id="call-ls")])

    agent = Agent(FunctionModel(model), capabilities=[SpillwayToolOutputs(aclient, run_id=run_id)])

    @agent.tool_plain
    def list_dir() -> str:
        """List a directory."""
        return listing

    result = await agent.run("list it")
    assert result.output == "done"
    record = await aclient.stat(run_id, "res_call-ls")
    assert str(returns(result.all_messages(), "list_dir")[0].content) == record.preview.text
    stored = b"".join([c async for c in aclient.read_bytes(run_id, "res_call-ls")])
    assert stored == listing.replace("\udcff", "\ufffd").encode()


async def test_agent_run_ids_keep_outputs_apart(aclient: AsyncSpillwayClient) -> None:
    capability = SpillwayToolOutputs(aclient, over_chars=1_000)
    first, _, _ = await run(capability, [{"handle": "{handle}", "limit": 1}])
    second, _, got = await run(capability, [{"handle": "{handle}", "limit": 1}])
    # Each agent run keeps its outputs in a Spillway run of its own, under the same handle.
    assert HANDLE.search(first).group(1) == HANDLE.search(second).group(1) == "res_call-tests"  # type: ignore[union-attr]
    assert got[0].splitlines()[1].strip() == "1\ttest 1: ok"


async def test_unreachable_service_shows_a_cut_output_and_the_run_goes_on(run_id: str) -> None:
    with spillway_server() as url:
        pass
    async with AsyncSpillwayClient(url) as client:
        shown, status, got = await run(
            SpillwayToolOutputs(client, run_id=run_id, over_chars=2_000, timeout=5), [{"handle": "res_call-tests"}]
        )
    assert shown.startswith(LOG[:2_000] + f"\n[output cut at 2000 of {len(LOG)}: it could not be stored")
    assert status == "all services up"
    assert got[0].startswith("error: unavailable: ")


async def test_a_hung_service_ends_each_call_at_the_default_deadline(run_id: str) -> None:
    """A Spillway that stops answering mid-run (the process frozen, its connection still open)
    costs the agent run each call's default deadline, not forever: the read is one error line."""
    with spillway_process() as (url, proc):
        async with AsyncSpillwayClient(url) as client:

            def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                if not returns(messages, "run_tests"):
                    return ModelResponse(parts=[ToolCallPart("run_tests", {}, tool_call_id="call-tests")])
                if returns(messages, "read_tool_output"):
                    return ModelResponse(parts=[TextPart("done")])
                proc.send_signal(signal.SIGSTOP)
                return ModelResponse(parts=[ToolCallPart("read_tool_output", {"handle": "res_call-tests"})])

            agent = Agent(FunctionModel(model), capabilities=[SpillwayToolOutputs(client, run_id=run_id)])

            @agent.tool_plain
            def run_tests() -> str:
                """Run the test suite."""
                return LOG

            started = time.monotonic()
            try:
                result = await asyncio.wait_for(agent.run("test it"), DEFAULT_TIMEOUT + 30)
            finally:
                proc.send_signal(signal.SIGCONT)
            elapsed = time.monotonic() - started
    got = str(returns(result.all_messages(), "read_tool_output")[0].content)
    assert got.startswith("error: deadline_exceeded"), got
    assert DEFAULT_TIMEOUT <= elapsed < DEFAULT_TIMEOUT + 20, elapsed


@dataclass
class _RejectFirstResult(AbstractCapability[Any]):
    """Rejects run_tests' first result with ModelRetry, as a validating capability would."""

    rejected: list[str]

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        if call.tool_name == "run_tests" and not self.rejected:
            self.rejected.append(str(result))
            raise ModelRetry("the run was flaky: run the tests again")
        return result


async def test_a_retried_call_is_kept_as_its_next_attempt(aclient: AsyncSpillwayClient, run_id: str) -> None:
    """pydantic-ai re-runs a call whose result a capability rejected with ModelRetry; the model repeats
    the call under the same id. The retry's output is the call's attempt 2, and attempt 1 stays readable."""
    runs: list[int] = []
    rejected: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # The first call, and its retry once the result was rejected, under the same call id.
        if all(p.outcome == "retried" for p in returns(messages, "run_tests")):
            return ModelResponse(parts=[ToolCallPart("run_tests", {}, tool_call_id="call-tests")])
        return ModelResponse(parts=[TextPart("done")])

    # after_tool_execute runs last capability first: Spillway stores the result, then it is rejected.
    agent = Agent(
        FunctionModel(model),
        capabilities=[_RejectFirstResult(rejected), SpillwayToolOutputs(aclient, run_id=run_id, over_chars=1_000)],
    )

    @agent.tool_plain
    def run_tests() -> str:
        """Run the test suite."""
        runs.append(len(runs) + 1)
        return f"run {len(runs)}\n" + LOG[:50_000]

    result = await agent.run("test it")
    assert result.output == "done" and runs == [1, 2]
    messages = result.all_messages()
    answered = returns(messages, "run_tests")
    assert [(p.tool_call_id, p.outcome) for p in answered] == [("call-tests", "retried"), ("call-tests", "success")]
    shown = str(answered[1].content)
    assert rejected[0].startswith("[res_call-tests] run_tests")
    assert shown.startswith("[res@2_call-tests] run_tests · ") and " · attempt 2 · " in shown.splitlines()[0]
    first = await aclient.read_tool_output(run_id, "res_call-tests", lines={"offset": 0, "limit": 1})
    second = await aclient.read_tool_output(run_id, "res@2_call-tests", lines={"offset": 0, "limit": 1})
    assert "run 1" in first.rendered and "run 2" in second.rendered
    listed = [a.handle for a in (await aclient.list(run_id)).attachments]
    assert listed == ["res_call-tests", "res@2_call-tests"]

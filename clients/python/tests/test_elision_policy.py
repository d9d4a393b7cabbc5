"""ElisionPolicy beyond the shared vectors, against a real server: what the summarizer is given,
timeouts that hold for a blocking sync summarizer, cancellation, the service down, option
checks, tool name patterns, and SpillwayToolOutputs driven by a policy in a real agent run."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import grpc
import pytest
from agent_script import returns
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from conftest import spillway_server
from spillway_client import AsyncSpillwayClient, Band, ElisionPolicy, Summarize, ToolOverride
from spillway_client.pydantic_ai import SpillwayToolOutputs
from spillway_client.retry import RetryPolicy
from spillway_client.tool_name_pattern import ToolFilter, matches_tool_pattern, pick_tool_pattern


def lines(n: int) -> str:
    return "\n".join(f"line {i}" for i in range(1, n + 1))


def summarize_all(fn: Any, **extra: Any) -> ElisionPolicy:
    return ElisionPolicy(bands=[Band(Summarize(fn, **extra))])


def recording(calls: list[str]) -> Any:
    """A summarizer that notes each text it is given and answers "s"."""

    def summarize(tool: str, text: str) -> str:
        calls.append(text)
        return "s"

    return summarize


def key(run_id: str, call: str, **extra: int) -> dict[str, str | int]:
    return {"tenant": "dev", "run_id": run_id, "call_id": call, **extra}


async def test_the_summarizer_gets_the_tool_name_and_full_text(aclient: AsyncSpillwayClient, run_id: str) -> None:
    seen: list[tuple[str, str]] = []

    async def summarize(tool: str, text: str) -> str:
        seen.append((tool, text))
        return f"{tool}: {len(text)} chars"

    content = lines(300)
    r = await summarize_all(summarize).apply(aclient, key(run_id, "args"), content, tool_name="build")
    assert seen == [("build", content)]
    assert r.kind == "summarized"
    assert r.text.split("\n")[1] == f"build: {len(content)} chars"
    assert 'read_tool_output(handle="res_args", offset=0)' in r.text
    assert (await aclient.stat(run_id, "res_args")).line_count == 300


async def test_a_blocking_sync_summarizer_is_cut_off_at_its_timeout(aclient: AsyncSpillwayClient, run_id: str) -> None:
    def blocks(tool: str, text: str) -> str:
        time.sleep(1.0)
        return "late"

    started = time.monotonic()
    r = await summarize_all(blocks, timeout=0.05).apply(aclient, key(run_id, "blocks"), lines(300))
    assert time.monotonic() - started < 0.9
    assert r.kind == "spilled"
    assert r.summary_failure is not None and r.summary_failure.reason == "timeout"
    assert r.text == (await aclient.stat(run_id, "res_blocks")).preview.text


async def test_an_async_summarizer_is_cancelled_at_its_timeout(aclient: AsyncSpillwayClient, run_id: str) -> None:
    cancelled = asyncio.Event()

    async def never(tool: str, text: str) -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    r = await summarize_all(never, timeout=0.05).apply(aclient, key(run_id, "never"), lines(300))
    assert r.summary_failure is not None and r.summary_failure.reason == "timeout"
    assert cancelled.is_set()


async def test_the_callers_cancellation_still_cancels(aclient: AsyncSpillwayClient, run_id: str) -> None:
    async def slow(tool: str, text: str) -> str:
        await asyncio.sleep(3600)
        return "never"

    task = asyncio.ensure_future(summarize_all(slow).apply(aclient, key(run_id, "cancel"), lines(300)))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The output was stored before the summarizer ran.
    assert (await aclient.stat(run_id, "res_cancel")).line_count == 300


async def test_a_huge_summary_leaves_a_bounded_spilled_view(aclient: AsyncSpillwayClient, run_id: str) -> None:
    r = await summarize_all(lambda tool, text: "S" * 5_000_000).apply(aclient, key(run_id, "huge"), lines(3000))
    assert r.kind == "spilled"
    assert r.summary_failure is not None and r.summary_failure.reason == "too_long"
    assert len(r.text) < 5000


async def test_a_refused_spill_is_raised_before_any_summary(aclient: AsyncSpillwayClient, run_id: str) -> None:
    calls: list[str] = []
    policy = summarize_all(recording(calls))
    await policy.apply(aclient, key(run_id, "twice", attempt=1), "first")
    with pytest.raises(grpc.RpcError) as err:
        await policy.apply(aclient, key(run_id, "twice", attempt=1), "different")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert calls == ["first"]


async def test_a_call_id_spilled_again_with_other_bytes_is_its_next_attempt(
    aclient: AsyncSpillwayClient, run_id: str
) -> None:
    policy = summarize_all(recording([]))
    first = await policy.apply(aclient, key(run_id, "again"), "first")
    second = await policy.apply(aclient, key(run_id, "again"), "second")
    assert first.attachment is not None and first.attachment.handle == "res_again"
    assert second.attachment is not None and second.attachment.handle == "res@2_again"


async def test_a_spill_with_unpaired_surrogates_is_stored_as_the_ts_policy_stores_it(
    aclient: AsyncSpillwayClient, run_id: str
) -> None:
    """A lone surrogate (os.fsdecode of a file name that is not UTF-8) is stored as U+FFFD in text,
    as the TS policy's UTF-8 encoding does, and as an escape in a JSON value, as JSON.stringify writes it."""
    name = os.fsdecode(b"report-\xff.csv")
    listing = "".join(f"{name} {i}\n" for i in range(2000))
    policy = ElisionPolicy(bands=[Band("passthrough", 4000), Band("spill")])
    text = await policy.apply(aclient, key(run_id, "text"), listing, tool_name="list_dir")
    value = await policy.apply(aclient, key(run_id, "json"), {"files": [name] * 1000}, tool_name="list_dir")
    assert text.kind == value.kind == "spilled"
    assert text.attachment is not None and value.attachment is not None
    stored = b"".join([c async for c in aclient.read_bytes(run_id, text.attachment.handle)])
    assert stored == listing.replace("\udcff", "\ufffd").encode()
    json_text = '{"files":[' + ",".join([r'"report-\udcff.csv"'] * 1000) + "]}"
    stored = b"".join([c async for c in aclient.read_bytes(run_id, value.attachment.handle)])
    assert stored == json_text.encode()
    assert value.size == len(json_text)


async def test_with_the_service_down() -> None:
    with spillway_server() as url:
        pass
    calls: list[str] = []
    async with AsyncSpillwayClient(url, retry=RetryPolicy(base_delay=0.001)) as down:
        best_effort = ElisionPolicy(bands=[Band(Summarize(recording(calls)))], truncate_budget=20)
        r = await best_effort.apply(down, key("down", "c"), lines(1000))
        assert r.kind == "preview_only"
        assert "full output not stored" in r.text
        assert calls == []
        required = ElisionPolicy(bands=[Band(Summarize(lambda t, x: "s"))], preservation="required")
        with pytest.raises(grpc.RpcError) as err:
            await required.apply(down, key("down", "c"), lines(1000))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "blob_store_required" in (err.value.details() or "")


@pytest.mark.parametrize(
    "build",
    [
        lambda: ElisionPolicy(bands=[]),
        lambda: ElisionPolicy(bands=[Band("spill", up_to=5)]),
        lambda: ElisionPolicy(bands=[Band("passthrough", 50), Band("passthrough", 10), Band("spill")]),
        lambda: ElisionPolicy(bands=[Band(Summarize(lambda t, x: "s", max_chars=0))]),
        lambda: ElisionPolicy(bands=[Band(Summarize(lambda t, x: "s", timeout=0))]),
        lambda: ElisionPolicy(bands=[Band("spill")], per_tool={"": ToolOverride(truncate_budget=1)}),
        lambda: ElisionPolicy(bands=[Band("spill")], per_tool={"x": ToolOverride(bands=[])}),
        lambda: ElisionPolicy(bands=[Band("spill")], per_tool={"x": ToolOverride(truncate_budget=-1)}),
        lambda: ElisionPolicy(bands=[Band("spill")], include=[]),
        lambda: ElisionPolicy(bands=[Band("spill")], per_tool={"x": [Band("spill")]}),  # type: ignore[dict-item]
        lambda: ElisionPolicy(bands=[Band("spill")], exclude=[""]),
        lambda: ElisionPolicy(bands=[Band("drop")]),  # type: ignore[arg-type]
    ],
)
def test_bad_options_are_refused(build: Any) -> None:
    with pytest.raises(ValueError, match="elision policy"):
        build()


def test_a_summarizer_that_is_not_callable_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="summarize must be callable"):
        Summarize("nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "name", "want"),
    [
        ("read_file", "read_file", True),
        ("read_file", "read_files", False),
        ("read_*", "read_file", True),
        ("read_*", "read_", True),
        ("*_log", "build_log", True),
        ("*_log", "build_log2", False),
        ("b*d*g", "build_log", True),
        ("b*d*x", "build_log", False),
        ("t?", "tx", True),
        ("t?", "t", False),
        ("t?", "txy", False),
        ("*", "", True),
        ("?", "\U0001f600", True),
        ("a**b", "ab", True),
        ("Read_File", "read_file", False),
    ],
)
def test_tool_patterns_match_as_in_the_ts_sdk(pattern: str, name: str, want: bool) -> None:
    assert matches_tool_pattern(pattern, name) is want


def test_the_deciding_pattern_does_not_depend_on_order() -> None:
    assert pick_tool_pattern(["build*", "build_log", "*"], "build_log") == "build_log"
    assert pick_tool_pattern(["*", "build_*", "*_log"], "build_log") == "build_*"
    assert pick_tool_pattern(["a?c", "?bc"], "abc") == "?bc"
    assert pick_tool_pattern(["?bc", "a?c"], "abc") == "?bc"
    assert pick_tool_pattern(["x*"], "abc") is None
    f = ToolFilter(["*"], ["secret_*"])
    assert (f.applies("build"), f.applies("secret_env"), f.applies(None)) == (True, False, True)
    assert ToolFilter(["build"], None).applies(None) is False


LOG = "".join(f"step {n}: ok\n" for n in range(1, 20_001))


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls both tools, then ends."""
    if not returns(messages, "run_build"):
        return ModelResponse(
            parts=[ToolCallPart("run_build", {}, tool_call_id="b"), ToolCallPart("read_env", {}, tool_call_id="e")]
        )
    return ModelResponse(parts=[TextPart("done")])


async def agent_run(capability: SpillwayToolOutputs) -> tuple[str, str]:
    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def run_build() -> str:
        """Build."""
        return LOG

    @agent.tool_plain
    def read_env() -> str:
        """Environment."""
        return "SECRET=" + "x" * 50_000

    result = await agent.run("build it")
    assert result.output == "done"
    messages = result.all_messages()
    return str(returns(messages, "run_build")[0].content), str(returns(messages, "read_env")[0].content)


async def test_an_agent_run_shows_the_summary_per_tool(aclient: AsyncSpillwayClient, run_id: str) -> None:
    async def summarize(tool: str, text: str) -> str:
        return f"{text.count(chr(10))} steps, all ok"

    policy = ElisionPolicy(
        bands=[Band("passthrough", 1000), Band("spill")],
        per_tool={"run_*": ToolOverride(bands=[Band("passthrough", 1000), Band(Summarize(summarize))])},
        exclude=["read_env"],
    )
    build, env = await agent_run(SpillwayToolOutputs(aclient, run_id=run_id, policy=policy))
    assert build.split("\n")[1] == "20000 steps, all ok"
    handle = build[1 : build.index("]")]
    assert handle == "res_b"
    stored = b"".join([c async for c in aclient.read_bytes(run_id, handle)])
    assert stored.decode() == LOG
    assert env == "SECRET=" + "x" * 50_000  # excluded: untouched, not stored


@pytest.mark.parametrize("failure", ["raises", "blocks"])
async def test_a_failing_summarizer_never_ends_the_agent_run(
    aclient: AsyncSpillwayClient, run_id: str, failure: str
) -> None:
    def summarize(tool: str, text: str) -> str:
        if failure == "raises":
            raise RuntimeError("the summarizing model is down")
        time.sleep(1.0)
        return "late"

    policy = ElisionPolicy(
        bands=[Band("passthrough", 1000), Band(Summarize(summarize, timeout=0.1))],
        include=["run_build"],
    )
    build, env = await agent_run(SpillwayToolOutputs(aclient, run_id=run_id, policy=policy))
    assert build == (await aclient.stat(run_id, "res_b")).preview.text
    assert env.startswith("SECRET=") and len(env) == 50_007
    assert build.startswith("[res_b]") and 'read_tool_output(handle="res_b"' in build

"""Parity: every elision vector in conformance/elision-vectors.json, applied by the Python SDK's
ElisionPolicy against a real server, gives the kind, size and text the vector (and the TS SDK)
gives, byte for byte; a summarize vector runs with a sync and with an async summarizer."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from spillway_client import AsyncSpillwayClient
from spillway_client.elision_policy import Action, Band, ElisionPolicy, ToolOverride, Truncate
from spillway_client.summarize_action import Summarize

VECTORS_FILE = Path(__file__).resolve().parents[3] / "conformance" / "elision-vectors.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))


def first_line(tool_name: str, text: str) -> str:
    return f"{tool_name} summary: {text.split(chr(10), 1)[0]} (+{text.count(chr(10))} more lines)"


def throws(tool_name: str, text: str) -> str:
    raise RuntimeError("summarizer exploded")


def hangs(tool_name: str, text: str) -> str:
    time.sleep(1)
    return "late"


def huge(tool_name: str, text: str) -> str:
    return "S" * 1_000_000


def empty(tool_name: str, text: str) -> str:
    return " \n\t"


def not_text(tool_name: str, text: str) -> Any:
    return 42


SYNC = {"first-line": first_line, "throws": throws, "hangs": hangs, "huge": huge, "empty": empty, "not-text": not_text}


def as_async(fn: Any) -> Any:
    async def summarize(tool_name: str, text: str) -> Any:
        if fn is hangs:
            await asyncio.sleep(1)
            return "late"
        return fn(tool_name, text)

    return summarize


def action(spec: Any, flavour: str) -> Action:
    if spec in ("passthrough", "spill"):
        return spec  # type: ignore[no-any-return]
    if "truncate" in spec:
        return Truncate(spec["truncate"])
    fn = SYNC[spec["summarize"]]
    extra: dict[str, Any] = {}
    if "maxChars" in spec:
        extra["max_chars"] = spec["maxChars"]
    if "timeoutMs" in spec:
        extra["timeout"] = spec["timeoutMs"] / 1000
    return Summarize(fn if flavour == "sync" else as_async(fn), **extra)


def bands(specs: list[dict[str, Any]], flavour: str) -> list[Band]:
    return [Band(action(b["action"], flavour), b.get("upTo")) for b in specs]


def policy(spec: dict[str, Any], flavour: str) -> ElisionPolicy:
    """The policy a vector names, its TS option names spelled the Python way."""
    per_tool = {
        pattern: ToolOverride(
            bands=None if "bands" not in o else bands(o["bands"], flavour), truncate_budget=o.get("truncateBudget")
        )
        for pattern, o in spec.get("perTool", {}).items()
    }
    fallback = spec.get("fallback", "truncate")
    return ElisionPolicy(
        bands=bands(spec["bands"], flavour),
        measure=spec.get("measure", "chars"),
        fallback="head+tail" if fallback == "truncate" else fallback["truncate"],
        preservation=spec.get("preservation", "best_effort"),
        truncate_budget=spec.get("truncateBudget", 2000),
        per_tool=per_tool,
        include=spec.get("include"),
        exclude=spec.get("exclude"),
        keep_ansi=spec.get("keepAnsi", False),
    )


def content(spec: dict[str, Any]) -> Any:
    if "text" in spec:
        return spec["text"]
    if "json" in spec:
        return spec["json"]
    return "".join(spec["repeat"].replace("%d", str(i)) for i in range(1, spec["count"] + 1))


def summarizes(vector: dict[str, Any]) -> bool:
    return "summarize" in json.dumps(vector["policy"])


CASES = [
    pytest.param(v, flavour, id=f"{v['name']}[{flavour}]" if summarizes(v) else v["name"])
    for v in VECTORS["vectors"]
    for flavour in (("sync", "async") if summarizes(v) else ("sync",))
]


def test_the_file_has_vectors_of_every_kind() -> None:
    kinds = {v["expect"]["kind"] for v in VECTORS["vectors"]}
    assert kinds == {"passthrough", "truncated", "spilled", "summarized"}
    reasons = {v["expect"].get("summaryFailure") for v in VECTORS["vectors"]} - {None}
    assert reasons == {"threw", "timeout", "too_long", "empty", "not_text"}


@pytest.mark.parametrize(("vector", "flavour"), CASES)
async def test_elision_vector_renders_identically(
    aclient: AsyncSpillwayClient, vector: dict[str, Any], flavour: str
) -> None:
    run_id = f"vec-{uuid.uuid4().hex[:12]}"
    given = content(vector["content"])
    r = await policy(vector["policy"], flavour).apply(
        aclient, {"tenant": "dev", "run_id": run_id, "call_id": vector["call"]}, given, tool_name=vector.get("toolName")
    )
    got: dict[str, Any] = {"kind": r.kind, "size": r.size, "text": r.text}
    if r.summary_failure is not None:
        got["summaryFailure"] = r.summary_failure.reason
    assert got == vector["expect"]
    # Nothing is lost: whatever the summarizer did, a stored output reads back whole.
    if r.attachment is not None:
        stored = b"".join([chunk async for chunk in aclient.read_bytes(run_id, r.attachment.handle)])
        expected = given if isinstance(given, str) else json.dumps(given, separators=(",", ":"), ensure_ascii=False)
        assert stored.decode("utf-8") == expected

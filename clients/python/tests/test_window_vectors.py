"""Parity: every window vector in conformance/window-vectors.json, run through the Python SDK
against a real server, renders byte for byte the text the vector (and the TS SDK) expects."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from spillway_client import SpillwayClient, execute_read_tool_output

VECTORS_FILE = Path(__file__).resolve().parents[3] / "conformance" / "window-vectors.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))

# The vectors spell window fields in camelCase (proto JSON names); the SDK takes proto field names.
FIELD_NAMES = {
    "offset": "offset",
    "limit": "limit",
    "fromEnd": "from_end",
    "pattern": "pattern",
    "regex": "regex",
    "ignoreCase": "ignore_case",
    "maxMatches": "max_matches",
    "skip": "skip",
    "contextLines": "context_lines",
    "query": "query",
}

# The vectors name windows by their proto JSON names; the SDK's keyword arguments by proto field names.
MODE_NAMES = {"jsonPath": "json_path"}


def payload_bytes(spec: dict[str, Any]) -> bytes:
    """Builds a vector's payload exactly as conformance/payload.ts does."""
    if "text" in spec:
        return spec["text"].encode("utf-8")
    if "base64" in spec:
        return base64.b64decode(spec["base64"])
    if "hex" in spec:
        return bytes.fromhex(spec["hex"])
    if "json" in spec:
        return json.dumps(spec["json"], separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if "repeat" in spec:
        return "".join(spec["repeat"].replace("%d", str(i)) for i in range(1, spec["count"] + 1)).encode("utf-8")
    if "byteCycle" in spec:
        return bytes(i % 256 for i in range(spec["byteCycle"]))
    raise ValueError(f"unknown payload spec {spec!r}")


def window_kwargs(window: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [(mode, fields)] = window.items()
    return {MODE_NAMES.get(mode, mode): {FIELD_NAMES[k]: v for k, v in fields.items()}}


# How the read_tool_output tool spells each window field.
TOOL_ARGS = {
    "fromEnd": "from_end",
    "ignoreCase": "ignore_case",
    "maxMatches": "limit",
    "contextLines": "context",
    "query": "jsonpath",
}


def tool_args(window: dict[str, Any]) -> dict[str, Any]:
    [(mode, fields)] = window.items()
    args = {TOOL_ARGS.get(k, k): v for k, v in fields.items()}
    return {**args, mode: True} if mode in ("bytes", "json") else args


# How PreviewOptions fields are spelled in the vectors (proto JSON names) and in Python.
PREVIEW_NAMES = {"headChars": "head_chars", "tailChars": "tail_chars", "keepAnsi": "keep_ansi"}


def offload_vector(client: SpillwayClient, vector: dict[str, Any]) -> tuple[str, str]:
    run_id, att = offload_vector_record(client, vector)
    return run_id, att.handle


def offload_vector_record(client: SpillwayClient, vector: dict[str, Any]) -> tuple[str, Any]:
    run_id = f"vec-{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {}
    if "slot" in vector:
        options["slot"] = vector["slot"]
    if "contentType" in vector:
        options["content_type"] = vector["contentType"]
    if "preview" in vector:
        options["preview"] = {PREVIEW_NAMES[k]: v for k, v in vector["preview"].items()}
    att = client.offload(
        {"tenant": "dev", "run_id": run_id, "call_id": vector["call"]}, payload_bytes(vector["payload"]), **options
    )
    return run_id, att


def test_server_runs_with_the_vectors_caps(client: SpillwayClient) -> None:
    caps = client.server_info().caps
    assert {
        "maxWindowLines": caps.max_window_lines,
        "maxWindowChars": caps.max_window_chars,
        "maxLineChars": caps.max_line_chars,
        "maxMatches": caps.max_matches,
    } == VECTORS["caps"]


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=[v["name"] for v in VECTORS["vectors"]])
def test_window_vector_renders_identically(client: SpillwayClient, vector: dict[str, Any]) -> None:
    run_id, handle = offload_vector(client, vector)
    expected = vector["rendered"].encode("utf-8")
    keep_ansi = vector.get("keepAnsi", False)
    window = client.read_tool_output(run_id, handle, keep_ansi=keep_ansi, **window_kwargs(vector["window"]))
    assert window.rendered.encode("utf-8") == expected

    # The model-facing tool renders the same bytes when the model asks for the same window.
    args = {"handle": handle, **tool_args(vector["window"]), **({"keep_ansi": True} if keep_ansi else {})}
    text = execute_read_tool_output(client, run_id, args)
    assert text.encode("utf-8") == expected


PREVIEW_VECTORS: list[dict[str, Any]] = VECTORS.get("previewVectors", [])


@pytest.mark.parametrize("vector", PREVIEW_VECTORS, ids=[v["name"] for v in PREVIEW_VECTORS])
def test_preview_vector_renders_identically(client: SpillwayClient, vector: dict[str, Any]) -> None:
    _, att = offload_vector_record(client, vector)
    assert (att.preview.head, att.preview.tail, att.preview.text) == (vector["head"], vector["tail"], vector["text"])

"""Parity: every vector in conformance/tool-args-vectors.json gets, from the Python model tool,
exactly the `error: ` line the TS and Go SDKs give, before any call to the service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spillway_client import SpillwayClient, execute_read_tool_output

VECTORS_FILE = Path(__file__).resolve().parents[3] / "conformance" / "tool-args-vectors.json"
VECTORS: list[dict[str, Any]] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))["vectors"]


def test_the_file_has_vectors() -> None:
    assert len(VECTORS) > 20


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_tool_args_vector(vector: dict[str, Any]) -> None:
    # Nothing listens here: arguments the tool wrongly accepted would answer `error: unavailable`.
    with SpillwayClient("127.0.0.1:9") as client:
        assert execute_read_tool_output(client, "run-args", vector["args"], timeout=5) == f"error: {vector['error']}"

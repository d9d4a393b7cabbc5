"""The read_tool_output tool's jsonpath argument, and json_path windows, against a real server."""

from __future__ import annotations

import json

from spillway_client import READ_TOOL_OUTPUT_TOOL, SpillwayClient, execute_read_tool_output

DOC = {"items": [{"id": i, "status": "failed" if i % 2 else "ok"} for i in range(5)]}
QUERY = "$.items[?@.status == 'failed'].id"


def test_declares_the_jsonpath_argument() -> None:
    prop = READ_TOOL_OUTPUT_TOOL["parameters"]["properties"]["jsonpath"]
    assert prop["type"] == "string" and prop["minLength"] == 1
    assert "jsonpath" in READ_TOOL_OUTPUT_TOOL["description"]


def test_tool_returns_the_server_rendered_jsonpath_window(client: SpillwayClient, run_id: str) -> None:
    att = client.offload(
        {"tenant": "dev", "run_id": run_id, "call_id": "api"},
        json.dumps(DOC).encode(),
        content_type="application/json",
    )
    text = execute_read_tool_output(client, run_id, {"handle": att.handle, "jsonpath": QUERY, "limit": 1, "skip": 1})
    window = client.read_tool_output(run_id, att.handle, json_path={"query": QUERY, "max_matches": 1, "skip": 1})
    assert text == window.rendered
    assert text == f'[res_api] nodes 2-2 for JSONPath "{QUERY}"\n' + "$['items'][3]['id']\t3\n[more matches: skip=2]\n"
    nodes = [n for f in window.frames if f.WhichOneof("frame") == "content" for n in f.content.nodes.nodes]
    assert [(n.path, n.value) for n in nodes] == [("$['items'][3]['id']", "3")]


def test_tool_refuses_bad_queries_and_mixed_windows(client: SpillwayClient, run_id: str) -> None:
    att = client.offload({"tenant": "dev", "run_id": run_id, "call_id": "api"}, json.dumps(DOC).encode())
    bad = execute_read_tool_output(client, run_id, {"handle": att.handle, "jsonpath": "$.items["})
    assert bad.startswith("error: invalid_argument: invalid JSONPath query at position 8")
    mixed = execute_read_tool_output(client, run_id, {"handle": att.handle, "jsonpath": "$", "pattern": "x"})
    assert mixed == "error: jsonpath cannot be combined with pattern (use skip and limit to page nodes)"

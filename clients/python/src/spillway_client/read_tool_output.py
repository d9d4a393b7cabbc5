"""The `read_tool_output` model tool: the same definition and argument rules as the TS SDK
(clients/ts/src/read-tool-output-tool.ts), and executors returning the server-rendered text."""

from __future__ import annotations

import json
import math
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, TypeAlias

import grpc

from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client.client import AsyncSpillwayClient, SpillwayClient
from spillway_client.errors import error_reason
from spillway_client.window import Window

READ_TOOL_OUTPUT_NAME = "read_tool_output"
"""The model tool's name; its results must never be offloaded again."""

READ_TOOL_OUTPUT_TOOL: dict[str, Any] = {
    "name": READ_TOOL_OUTPUT_NAME,
    "description": " ".join(
        [
            "Read a window of a large tool output that was stored instead of shown in full.",
            "Pass the handle from its preview (for example res_call-1).",
            "Lines: offset is the 0-based line to start at and limit the number of lines; with",
            "from_end=true both count back from the last line (a tail). Lines are numbered from 1 like",
            "`cat -n`, and every window ends with how to ask for the next one.",
            "Search: set pattern (a literal string, or an RE2 regular expression with regex=true;",
            "ignore_case, context lines around each match, skip matches already seen, limit matches).",
            "Bytes: bytes=true reads raw bytes (offset and limit are then bytes), for binary outputs",
            "and very long lines.",
            "JSON: json=true pages a JSON output pretty-printed, one member or element per line (JSON",
            "Lines: one record per line); offset, limit and from_end then count lines of that view.",
            "JSONPath: jsonpath runs an RFC 9535 JSONPath query (for example $.items[?@.status=='failed'].id)",
            "and returns the matched nodes' paths and values; skip and limit page them.",
            "The service caps every window, whatever limit you ask for.",
            "Terminal colour codes are removed from the text unless keep_ansi=true.",
        ]
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "The output's handle, as shown in its preview."},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "0-based line (or byte, with bytes=true) to start at. Default 0.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Lines, bytes or matches to return; the service caps it.",
            },
            "from_end": {"type": "boolean", "description": "Count offset and limit back from the last line."},
            "pattern": {"type": "string", "minLength": 1, "description": "Search for this text."},
            "regex": {"type": "boolean", "description": "Treat pattern as an RE2 regular expression."},
            "ignore_case": {"type": "boolean", "description": "Match the pattern case-insensitively."},
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": 20,
                "description": "Lines of context before and after each match.",
            },
            "skip": {"type": "integer", "minimum": 0, "description": "Matches to skip (to page a search)."},
            "jsonpath": {
                "type": "string",
                "minLength": 1,
                "description": "An RFC 9535 JSONPath query over a JSON or JSON Lines output.",
            },
            "bytes": {"type": "boolean", "description": "Read raw bytes; offset and limit are then bytes."},
            "json": {
                "type": "boolean",
                "description": "Read the JSON view; offset and limit are then lines of that view.",
            },
            "mode": {
                "type": "string",
                "enum": ["lines", "bytes", "json"],
                "description": 'Same as bytes=true when "bytes", json=true when "json".',
            },
            "keep_ansi": {
                "type": "boolean",
                "description": (
                    "Keep terminal escape sequences (colour codes) in the text; by default they are removed."
                ),
            },
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
}
"""The ready `read_tool_output` definition (name, description, JSON Schema), identical to the TS SDK's.

`handle` is required and no other properties are allowed; `mode: "bytes"` is an alias of
`bytes: true`, because the server's previews and hints spell bytes reads that way, and
`mode: "json"` of `json: true`.
"""

_KNOWN = tuple(READ_TOOL_OUTPUT_TOOL["parameters"]["properties"])
_MAX_SAFE_INTEGER = 2**53 - 1
_JSONPATH_EXCLUDES = ("pattern", "regex", "ignore_case", "context", "offset", "from_end", "bytes", "json", "mode")
"""Arguments of other windows, which a JSONPath query does not take."""
_INT32_MAX = 2**31 - 1


def parse_read_tool_output_args(args: object) -> dict[str, Any] | str:
    """parse_read_tool_output_args maps the model's arguments to read_tool_output keyword arguments.

    Returns a dict with `handle`, one window (`lines`, `bytes`, `search`, `json` or `json_path`) and
    `keep_ansi` when the model set it, or a short
    sentence saying what is wrong, worded exactly as the TS SDK words it.
    """
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return "arguments are not valid JSON"
    if not isinstance(args, Mapping):
        return "arguments must be an object with a handle"
    a: Mapping[str, Any] = args
    unknown = next((k for k in a if k not in _KNOWN), None)
    if unknown is not None:
        return f"unknown argument {json.dumps(unknown, ensure_ascii=False)}"
    handle = a.get("handle")
    if not isinstance(handle, str) or handle == "":
        return "handle must be a non-empty string"
    problem = (
        _check_int(a, "offset", 0)
        or _check_int(a, "limit", 1)
        or _check_int(a, "context", 0, 20)
        or _check_int(a, "skip", 0)
        or _check_bool(a, "from_end")
        or _check_bool(a, "regex")
        or _check_bool(a, "ignore_case")
        or _check_bool(a, "bytes")
        or _check_bool(a, "json")
        or _check_bool(a, "keep_ansi")
    )
    if problem is not None:
        return problem
    if "mode" in a and a["mode"] not in ("lines", "bytes", "json"):
        return 'mode must be "lines", "bytes" or "json"'
    offset = _int(a.get("offset"))
    limit = _int(a.get("limit"))
    # Lines and matches limits are int32 on the wire; the server caps windows far below anyway.
    small_limit = None if limit is None else min(limit, _INT32_MAX)
    as_bytes = a.get("bytes") is True or a.get("mode") == "bytes"
    as_json = a.get("json") is True or a.get("mode") == "json"
    if as_bytes and as_json:
        return "bytes and json cannot be combined"
    search_only = next((k for k in ("regex", "ignore_case", "context", "skip") if k in a), None)
    keep_ansi: dict[str, Any] = {"keep_ansi": True} if a.get("keep_ansi") is True else {}
    if "jsonpath" in a:
        query = a["jsonpath"]
        if not isinstance(query, str) or query == "":
            return "jsonpath must be a non-empty string"
        other = next((k for k in _JSONPATH_EXCLUDES if k in a), None)
        if other is not None:
            return f"jsonpath cannot be combined with {other} (use skip and limit to page nodes)"
        json_path: dict[str, Any] = {"query": query, "skip": _int(a.get("skip")) or 0}
        if small_limit is not None:
            json_path["max_matches"] = small_limit
        return {"handle": handle, "json_path": json_path, **keep_ansi}
    if "pattern" in a:
        pattern = a["pattern"]
        if not isinstance(pattern, str) or pattern == "":
            return "pattern must be a non-empty string"
        if as_json:
            return "pattern cannot be combined with json"
        if as_bytes or "from_end" in a or offset is not None:
            return "pattern cannot be combined with bytes, from_end or offset (use skip to page matches)"
        search: dict[str, Any] = {
            "pattern": pattern,
            "regex": a.get("regex") is True,
            "ignore_case": a.get("ignore_case") is True,
            "skip": _int(a.get("skip")) or 0,
            "context_lines": _int(a.get("context")) or 0,
        }
        if small_limit is not None:
            search["max_matches"] = small_limit
        return {"handle": handle, "search": search, **keep_ansi}
    if search_only is not None:
        return f"{search_only} needs a pattern"
    if as_bytes:
        if "from_end" in a:
            return "from_end applies to lines, not bytes"
        window: dict[str, Any] = {"offset": offset or 0}
        if limit is not None:
            window["limit"] = limit
        return {"handle": handle, "bytes": window, **keep_ansi}
    lines: dict[str, Any] = {"offset": offset or 0, "from_end": a.get("from_end") is True}
    if small_limit is not None:
        lines["limit"] = small_limit
    return {"handle": handle, "json" if as_json else "lines": lines, **keep_ansi}


_REMEMBERED_SEARCHES = 64
"""Searches whose last cursor is remembered per client; the least recently used is forgotten."""

_CursorKey: TypeAlias = tuple[str, str, str, bool, bool, bool]
_cursors: weakref.WeakKeyDictionary[object, OrderedDict[_CursorKey, pb.SearchCursor]] = weakref.WeakKeyDictionary()


class _SearchPaging:
    """The search cursor one read may send, and where to remember the one its window returns."""

    def __init__(self, client: object, run_id: str, parsed: dict[str, Any]) -> None:
        search = parsed.get("search")
        self.remembered = _cursors.setdefault(client, OrderedDict())
        self.key: _CursorKey | None = (
            None
            if search is None
            else (
                run_id,
                parsed["handle"],
                search["pattern"],
                search["regex"],
                search["ignore_case"],
                parsed.get("keep_ansi") is True,
            )
        )
        known = None if self.key is None else self.remembered.get(self.key)
        self.cursor = (
            known if known is not None and search is not None and known.matches_before <= search["skip"] else None
        )

    def window(self, parsed: dict[str, Any], with_cursor: bool) -> dict[str, Any]:
        """The read_tool_output keyword arguments, with the cursor when there is one to send;
        only the rendered text is asked for, the model's whole answer."""
        kwargs = {k: v for k, v in parsed.items() if k != "handle"}
        kwargs["rendered_only"] = True
        if with_cursor and self.cursor is not None:
            kwargs["search"] = {**kwargs["search"], "after": self.cursor}
        return kwargs

    def refused(self, err: grpc.RpcError) -> bool:
        """True (and the cursor dropped) when the server refused the cursor, not the read."""
        details = err.details() if hasattr(err, "details") else ""
        if self.cursor is None or self.key is None or not (details or "").startswith("search.after:"):
            return False
        self.remembered.pop(self.key, None)
        return True

    def remember(self, window: Window) -> Window:
        """Keeps the window's cursor for the search's next page."""
        trailer = window.trailer
        if self.key is not None and trailer is not None and trailer.HasField("search_cursor"):
            self.remembered.pop(self.key, None)
            self.remembered[self.key] = trailer.search_cursor
            while len(self.remembered) > _REMEMBERED_SEARCHES:
                self.remembered.popitem(last=False)
        return window


def execute_read_tool_output(client: SpillwayClient, run_id: str, args: object, *, timeout: float | None = None) -> str:
    """execute_read_tool_output runs the tool for run `run_id` and returns exactly the server-rendered text.

    The run comes from the runtime, never from the model. Bad arguments and server refusals
    never raise: they return one short line starting with `error: ` (a forged handle gives
    `error: invalid_deferred_handle: …`). Only errors that are not gRPC errors are raised.

    The model pages a search with `skip`, as the rendered text tells it. For each client the
    executor keeps the trailer's search cursor of the last window of each search (run, handle,
    pattern, regex, ignore_case; the 64 most recent) and sends it with a later page whose skip
    is at or past it, so paging through every match reads the output about once instead of
    once per page. The text is the same either way; a cursor the server refuses is dropped
    and the page read again without it. This is the TS SDK's behaviour.
    """
    parsed = parse_read_tool_output_args(args)
    if isinstance(parsed, str):
        return f"error: {parsed}"
    paging = _SearchPaging(client, run_id, parsed)
    handle = parsed["handle"]
    try:
        try:
            window = client.read_tool_output(run_id, handle, timeout=timeout, **paging.window(parsed, True))
        except grpc.RpcError as err:
            if not paging.refused(err):
                raise
            window = client.read_tool_output(run_id, handle, timeout=timeout, **paging.window(parsed, False))
        return paging.remember(window).rendered
    except grpc.RpcError as err:
        return f"error: {describe_error(err)}"


async def execute_read_tool_output_async(
    client: AsyncSpillwayClient, run_id: str, args: object, *, timeout: float | None = None
) -> str:
    """execute_read_tool_output_async is execute_read_tool_output for the async client."""
    parsed = parse_read_tool_output_args(args)
    if isinstance(parsed, str):
        return f"error: {parsed}"
    paging = _SearchPaging(client, run_id, parsed)
    handle = parsed["handle"]
    try:
        try:
            window = await client.read_tool_output(run_id, handle, timeout=timeout, **paging.window(parsed, True))
        except grpc.RpcError as err:
            if not paging.refused(err):
                raise
            window = await client.read_tool_output(run_id, handle, timeout=timeout, **paging.window(parsed, False))
        return paging.remember(window).rendered
    except grpc.RpcError as err:
        return f"error: {describe_error(err)}"


def describe_error(err: grpc.RpcError) -> str:
    """describe_error names the ErrorInfo reason (or else the snake_case code) and the server's message."""
    message = err.details() if hasattr(err, "details") else str(err)
    message = message or ""
    reason = error_reason(err)
    if reason:
        # The server's messages for reasoned errors already start with the reason.
        return message if message.startswith(f"{reason}:") else f"{reason}: {message}"
    code = err.code().name.lower() if hasattr(err, "code") else "unknown"
    return f"{code}: {message}"


def _check_int(a: Mapping[str, Any], name: str, minimum: int, maximum: int = _MAX_SAFE_INTEGER) -> str | None:
    if name not in a:
        return None
    v = _int(a[name])
    if v is None or v < minimum or v > maximum:
        return (
            f"{name} must be an integer >= {minimum}"
            if maximum == _MAX_SAFE_INTEGER
            else f"{name} must be an integer from {minimum} to {maximum}"
        )
    return None


def _int(v: object) -> int | None:
    """An integral JSON number as int (JSON has one number type: 3.0 is 3), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and abs(v) <= _MAX_SAFE_INTEGER:
        return v
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) <= _MAX_SAFE_INTEGER:
        return int(v)
    return None


def _check_bool(a: Mapping[str, Any], name: str) -> str | None:
    v = a.get(name)
    return None if name not in a or isinstance(v, bool) else f"{name} must be true or false"

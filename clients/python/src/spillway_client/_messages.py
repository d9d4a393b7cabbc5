"""Request building shared by the sync and async clients (no I/O here)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, TypeAlias

import grpc
from google.protobuf.duration_pb2 import Duration

from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client._gen.spillway.v1 import types_pb2 as types_pb
from spillway_client.errors import BatchItemError

CHUNK_BYTES = 1024 * 1024
"""Payloads are streamed in chunks of this size (the server's default max_chunk_bytes is larger)."""

KeyLike: TypeAlias = types_pb.BlobKey | Mapping[str, Any]
"""A BlobKey message or a mapping with `tenant`, `run_id`, `call_id` and, for a retried call,
`attempt` (absent, 0 or 1 for the first attempt; 2 to 1000 for retries)."""

TtlLike: TypeAlias = timedelta | float | int | Duration
"""A time to live: a timedelta, seconds, or a Duration message."""

WindowLike: TypeAlias = Mapping[str, Any] | Any
"""A window message (LinesWindow, BytesWindow, SearchWindow) or a mapping of its fields."""


KEY_FIELDS = ("tenant", "run_id", "call_id")
"""The fields a key mapping must have."""


def check_key(key: KeyLike) -> None:
    """check_key raises ValueError naming the fields a key mapping lacks (a BlobKey message has them all)."""
    if isinstance(key, types_pb.BlobKey):
        return
    missing = [name for name in KEY_FIELDS if name not in key]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise ValueError(f"key is missing {names}: a key needs 'tenant', 'run_id' and 'call_id'")


def to_key(key: KeyLike, attempt: int | None = None) -> types_pb.BlobKey:
    """to_key returns `key` as a BlobKey message, with `attempt` in place of the key's own when given;
    a mapping without `tenant`, `run_id` or `call_id` is a ValueError naming the missing ones."""
    if isinstance(key, types_pb.BlobKey):
        if attempt is None:
            return key
        copy = types_pb.BlobKey()
        copy.CopyFrom(key)
        copy.attempt = attempt
        return copy
    check_key(key)
    return types_pb.BlobKey(
        tenant=key["tenant"],
        run_id=key["run_id"],
        call_id=key["call_id"],
        attempt=int(key.get("attempt") or 0) if attempt is None else attempt,
    )


def to_duration(ttl: TtlLike) -> Duration:
    """to_duration returns `ttl` as a Duration message, to the nanosecond."""
    if isinstance(ttl, Duration):
        return ttl
    d = Duration()
    d.FromTimedelta(ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl))
    return d


def is_stream(data: object) -> bool:
    """is_stream tells whether offload data is a byte stream (sent as it comes, not replayable)."""
    return isinstance(data, (Iterator, AsyncIterable)) or (
        isinstance(data, Iterable) and not isinstance(data, (bytes, bytearray, memoryview, str, list, tuple, dict))
    )


Payload: TypeAlias = bytes | memoryview
"""Replayable payload bytes: the caller's own bytes, or a flat view of its buffer (never a copy)."""


def byte_view(data: bytes | bytearray | memoryview) -> Payload:
    """byte_view returns bytes as they are and any other buffer as a flat view of its bytes,
    without copying (a strided view, which has no flat layout to slice, is the one exception)."""
    if isinstance(data, bytes):
        return data
    view = memoryview(data)
    return view.cast("B") if view.c_contiguous else memoryview(view.tobytes())


_SURROGATE = re.compile("[\ud800-\udfff]")


def _as_utf16(text: str) -> str:
    """text read as the UTF-16 code units a JS string of the same units holds: a high surrogate
    then a low one become the character they make; any other surrogate stays as it is."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def utf8(text: str) -> bytes:
    """utf8 is `text` as UTF-8, the bytes the TS SDK stores for the same UTF-16 code units.

    A surrogate that is not half of a pair (os.fsdecode gives one for a file name that is not
    UTF-8) becomes U+FFFD, as Node's UTF-8 encoding writes it, where Python's would raise; a high
    and a low surrogate in a row are the character they make.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", _as_utf16(text)).encode("utf-8")


def json_text(value: object) -> str:
    """json_text is the compact JSON text `JSON.stringify` writes for `value`.

    A surrogate that is not half of a pair is written as its `\\uXXXX` escape, as JSON.stringify
    writes it (it can only stand in a string, where the escape is valid JSON), so the text always
    has a UTF-8 encoding.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", _as_utf16(text))


def payload_bytes(data: object) -> tuple[Payload, bool]:
    """payload_bytes turns replayable offload data into bytes; the flag is True for JSON values.

    Bytes are sent unchanged and a bytearray or memoryview through a byte view of the caller's
    buffer, so a payload held whole is never copied whole; text goes as UTF-8 (`utf8`), anything
    else as compact JSON (`json_text`: the same bytes `JSON.stringify` gives, so the TS and Python
    SDKs store identical payloads, lone surrogates included).
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return byte_view(data), False
    if isinstance(data, str):
        return utf8(data), False
    return json_text(data).encode("utf-8"), True


def header(key: KeyLike, options: Mapping[str, Any], *, json_value: bool) -> pb.OffloadRequest:
    """header builds the first Offload message from the key and header options.

    `ttl` takes a timedelta or seconds and `preview` a mapping with `head_chars`/`tail_chars`;
    a JSON value defaults `content_type` to `application/json` (which enables the JSON preview).
    `attempt`, a key field, may be given among the options too: it replaces the key's attempt.
    """
    fields = dict(options)
    attempt = fields.pop("attempt", None)
    if "ttl" in fields:
        fields["ttl"] = to_duration(fields["ttl"])
    if isinstance(fields.get("preview"), Mapping):
        fields["preview"] = pb.PreviewOptions(**fields["preview"])
    if json_value:
        fields.setdefault("content_type", "application/json")
    return pb.OffloadRequest(header=pb.OffloadHeader(key=to_key(key, attempt), **fields))


def chunk_requests(data: Payload) -> Iterator[pb.OffloadRequest]:
    """chunk_requests yields `data` as chunk messages of at most CHUNK_BYTES, each built only when
    the one before it was taken, so at most one chunk's copy exists besides the caller's buffer."""
    view = memoryview(data)
    for i in range(0, len(view), CHUNK_BYTES):
        yield pb.OffloadRequest(chunk=view[i : i + CHUNK_BYTES].tobytes())


def offload_requests(first: pb.OffloadRequest, data: Payload) -> Iterator[pb.OffloadRequest]:
    """offload_requests is one attempt's Offload stream of replayable data: the header, then the
    chunks, built lazily; every call starts over, so a retry resends the same bytes."""
    yield first
    yield from chunk_requests(data)


def read_request(
    run_id: str,
    handle: str,
    *,
    lines: WindowLike | None,
    bytes_: WindowLike | None,
    search: WindowLike | None,
    omit_rendered: bool,
    json_: WindowLike | None = None,
    json_path: WindowLike | None = None,
    keep_ansi: bool = False,
    rendered_only: bool = False,
) -> pb.ReadToolOutputRequest:
    """read_request builds a ReadToolOutput request; at most one window may be given."""
    given = [w for w in (lines, bytes_, search, json_, json_path) if w is not None]
    if len(given) > 1:
        raise ValueError("read_tool_output takes at most one of lines, bytes, search, json and json_path")
    req = pb.ReadToolOutputRequest(
        run_id=run_id, handle=handle, omit_rendered=omit_rendered, keep_ansi=keep_ansi, rendered_only=rendered_only
    )
    if lines is not None:
        req.lines.CopyFrom(lines if isinstance(lines, pb.LinesWindow) else pb.LinesWindow(**lines))
    elif bytes_ is not None:
        req.bytes.CopyFrom(bytes_ if isinstance(bytes_, pb.BytesWindow) else pb.BytesWindow(**bytes_))
    elif search is not None:
        req.search.CopyFrom(search if isinstance(search, pb.SearchWindow) else pb.SearchWindow(**search))
    elif json_ is not None:
        req.json.CopyFrom(json_ if isinstance(json_, pb.JsonWindow) else pb.JsonWindow(**json_))
    elif json_path is not None:
        window = json_path if isinstance(json_path, pb.JsonPathWindow) else pb.JsonPathWindow(**json_path)
        req.json_path.CopyFrom(window)
    return req


BatchItemLike: TypeAlias = tuple[KeyLike, Any] | tuple[KeyLike, Any, Mapping[str, Any]]
"""A batch item: (key, data) or (key, data, header options), data bytes, str or a JSON value."""


def batch_request(items: Iterable[BatchItemLike]) -> pb.OffloadBatchRequest:
    """batch_request builds an OffloadBatch request; a stream is refused (a batch item is whole), and
    so is a key without tenant, run_id or call_id (a ValueError naming the item's index)."""
    req = pb.OffloadBatchRequest()
    for index, item in enumerate(items):
        key, data = item[0], item[1]
        options: Mapping[str, Any] = item[2] if len(item) > 2 else {}  # type: ignore[misc]
        if is_stream(data):
            raise TypeError("offload_batch takes whole payloads (bytes, str, JSON values), not streams")
        try:
            check_key(key)
        except ValueError as err:
            raise ValueError(f"offload_batch item {index}: {err}") from None
        payload, json_value = payload_bytes(data)
        req.items.add(header=header(key, options, json_value=json_value).header, data=bytes(payload))
    return req


def batch_outcomes(res: pb.OffloadBatchResponse, count: int) -> list[types_pb.ResultAttachment | BatchItemError]:
    """batch_outcomes turns an OffloadBatch answer for `count` items into each item's record or
    BatchItemError, in order; an answer with another number of results is a RuntimeError."""
    if len(res.results) != count:
        raise RuntimeError(f"protocol error: {len(res.results)} results for a batch of {count}")
    return [
        r.offloaded.attachment
        if r.WhichOneof("result") == "offloaded"
        else BatchItemError(r.error.code, r.error.message)
        for r in res.results
    ]


Outcome: TypeAlias = "types_pb.ResultAttachment | BatchItemError"


def refused_for_room(outcomes: list[Outcome]) -> list[int]:
    """refused_for_room returns the indices of the items answered ABORTED: nothing of them was
    committed (the reply had no room for their answers, or a merge was writing their handles),
    so they may be sent again."""
    return [i for i, o in enumerate(outcomes) if isinstance(o, BatchItemError) and o.code() == grpc.StatusCode.ABORTED]


def resend_request(req: pb.OffloadBatchRequest, indices: list[int]) -> pb.OffloadBatchRequest:
    """resend_request is the OffloadBatch of the items of `req` at `indices`, in order."""
    return pb.OffloadBatchRequest(items=[req.items[i] for i in indices])


def take_resent(outcomes: list[Outcome], indices: list[int], again: list[Outcome]) -> list[int]:
    """take_resent puts the answers of items sent again into `outcomes` and returns the indices
    still to send: none once a round commits none of them (its refusals are then the answers)."""
    for i, outcome in zip(indices, again, strict=True):
        outcomes[i] = outcome
    still = [indices[j] for j in refused_for_room(again)]
    return [] if len(still) == len(indices) else still

import datetime

from spillway_client._gen.buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from spillway_client._gen.spillway.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OffloadRequest(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: OffloadHeader
    chunk: bytes
    def __init__(self, header: _Optional[_Union[OffloadHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class OffloadHeader(_message.Message):
    __slots__ = ("key", "slot", "name", "content_type", "expected_size", "expected_sha256", "observed_bytes", "truncated", "ttl", "preview", "preview_only")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_ONLY_FIELD_NUMBER: _ClassVar[int]
    key: _types_pb2.BlobKey
    slot: str
    name: str
    content_type: str
    expected_size: int
    expected_sha256: str
    observed_bytes: int
    truncated: bool
    ttl: _duration_pb2.Duration
    preview: PreviewOptions
    preview_only: bool
    def __init__(self, key: _Optional[_Union[_types_pb2.BlobKey, _Mapping]] = ..., slot: _Optional[str] = ..., name: _Optional[str] = ..., content_type: _Optional[str] = ..., expected_size: _Optional[int] = ..., expected_sha256: _Optional[str] = ..., observed_bytes: _Optional[int] = ..., truncated: _Optional[bool] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., preview: _Optional[_Union[PreviewOptions, _Mapping]] = ..., preview_only: _Optional[bool] = ...) -> None: ...

class PreviewOptions(_message.Message):
    __slots__ = ("head_chars", "tail_chars", "keep_ansi")
    HEAD_CHARS_FIELD_NUMBER: _ClassVar[int]
    TAIL_CHARS_FIELD_NUMBER: _ClassVar[int]
    KEEP_ANSI_FIELD_NUMBER: _ClassVar[int]
    head_chars: int
    tail_chars: int
    keep_ansi: bool
    def __init__(self, head_chars: _Optional[int] = ..., tail_chars: _Optional[int] = ..., keep_ansi: _Optional[bool] = ...) -> None: ...

class OffloadResponse(_message.Message):
    __slots__ = ("attachment", "created")
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    attachment: _types_pb2.ResultAttachment
    created: bool
    def __init__(self, attachment: _Optional[_Union[_types_pb2.ResultAttachment, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class OffloadBatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[OffloadBatchItem]
    def __init__(self, items: _Optional[_Iterable[_Union[OffloadBatchItem, _Mapping]]] = ...) -> None: ...

class OffloadBatchItem(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: OffloadHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[OffloadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class OffloadBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[OffloadBatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[OffloadBatchResult, _Mapping]]] = ...) -> None: ...

class OffloadBatchResult(_message.Message):
    __slots__ = ("offloaded", "error")
    OFFLOADED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    offloaded: OffloadResponse
    error: OffloadBatchError
    def __init__(self, offloaded: _Optional[_Union[OffloadResponse, _Mapping]] = ..., error: _Optional[_Union[OffloadBatchError, _Mapping]] = ...) -> None: ...

class OffloadBatchError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ReadToolOutputRequest(_message.Message):
    __slots__ = ("run_id", "handle", "lines", "bytes", "search", "json", "json_path", "omit_rendered", "keep_ansi", "rendered_only")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    JSON_PATH_FIELD_NUMBER: _ClassVar[int]
    OMIT_RENDERED_FIELD_NUMBER: _ClassVar[int]
    KEEP_ANSI_FIELD_NUMBER: _ClassVar[int]
    RENDERED_ONLY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    handle: str
    lines: LinesWindow
    bytes: BytesWindow
    search: SearchWindow
    json: JsonWindow
    json_path: JsonPathWindow
    omit_rendered: bool
    keep_ansi: bool
    rendered_only: bool
    def __init__(self, run_id: _Optional[str] = ..., handle: _Optional[str] = ..., lines: _Optional[_Union[LinesWindow, _Mapping]] = ..., bytes: _Optional[_Union[BytesWindow, _Mapping]] = ..., search: _Optional[_Union[SearchWindow, _Mapping]] = ..., json: _Optional[_Union[JsonWindow, _Mapping]] = ..., json_path: _Optional[_Union[JsonPathWindow, _Mapping]] = ..., omit_rendered: _Optional[bool] = ..., keep_ansi: _Optional[bool] = ..., rendered_only: _Optional[bool] = ...) -> None: ...

class LinesWindow(_message.Message):
    __slots__ = ("offset", "limit", "from_end")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_END_FIELD_NUMBER: _ClassVar[int]
    offset: int
    limit: int
    from_end: bool
    def __init__(self, offset: _Optional[int] = ..., limit: _Optional[int] = ..., from_end: _Optional[bool] = ...) -> None: ...

class BytesWindow(_message.Message):
    __slots__ = ("offset", "limit")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    offset: int
    limit: int
    def __init__(self, offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class SearchWindow(_message.Message):
    __slots__ = ("pattern", "regex", "ignore_case", "max_matches", "skip", "context_lines", "after")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    IGNORE_CASE_FIELD_NUMBER: _ClassVar[int]
    MAX_MATCHES_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LINES_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    regex: bool
    ignore_case: bool
    max_matches: int
    skip: int
    context_lines: int
    after: SearchCursor
    def __init__(self, pattern: _Optional[str] = ..., regex: _Optional[bool] = ..., ignore_case: _Optional[bool] = ..., max_matches: _Optional[int] = ..., skip: _Optional[int] = ..., context_lines: _Optional[int] = ..., after: _Optional[_Union[SearchCursor, _Mapping]] = ...) -> None: ...

class JsonWindow(_message.Message):
    __slots__ = ("offset", "limit", "from_end")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_END_FIELD_NUMBER: _ClassVar[int]
    offset: int
    limit: int
    from_end: bool
    def __init__(self, offset: _Optional[int] = ..., limit: _Optional[int] = ..., from_end: _Optional[bool] = ...) -> None: ...

class JsonPathWindow(_message.Message):
    __slots__ = ("query", "max_matches", "skip")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MAX_MATCHES_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    query: str
    max_matches: int
    skip: int
    def __init__(self, query: _Optional[str] = ..., max_matches: _Optional[int] = ..., skip: _Optional[int] = ...) -> None: ...

class SearchCursor(_message.Message):
    __slots__ = ("byte_offset", "line", "matches_before", "check")
    BYTE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    MATCHES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    byte_offset: int
    line: int
    matches_before: int
    check: str
    def __init__(self, byte_offset: _Optional[int] = ..., line: _Optional[int] = ..., matches_before: _Optional[int] = ..., check: _Optional[str] = ...) -> None: ...

class ReadToolOutputResponse(_message.Message):
    __slots__ = ("header", "content", "trailer")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    header: WindowHeader
    content: WindowContent
    trailer: WindowTrailer
    def __init__(self, header: _Optional[_Union[WindowHeader, _Mapping]] = ..., content: _Optional[_Union[WindowContent, _Mapping]] = ..., trailer: _Optional[_Union[WindowTrailer, _Mapping]] = ...) -> None: ...

class WindowHeader(_message.Message):
    __slots__ = ("handle", "total_bytes", "total_lines", "binary", "content_type", "start", "view_lines")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    VIEW_LINES_FIELD_NUMBER: _ClassVar[int]
    handle: str
    total_bytes: int
    total_lines: int
    binary: bool
    content_type: str
    start: int
    view_lines: int
    def __init__(self, handle: _Optional[str] = ..., total_bytes: _Optional[int] = ..., total_lines: _Optional[int] = ..., binary: _Optional[bool] = ..., content_type: _Optional[str] = ..., start: _Optional[int] = ..., view_lines: _Optional[int] = ...) -> None: ...

class WindowContent(_message.Message):
    __slots__ = ("data", "lines", "matches", "nodes")
    DATA_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    lines: Lines
    matches: Matches
    nodes: JsonNodes
    def __init__(self, data: _Optional[bytes] = ..., lines: _Optional[_Union[Lines, _Mapping]] = ..., matches: _Optional[_Union[Matches, _Mapping]] = ..., nodes: _Optional[_Union[JsonNodes, _Mapping]] = ...) -> None: ...

class JsonNodes(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[JsonNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[JsonNode, _Mapping]]] = ...) -> None: ...

class JsonNode(_message.Message):
    __slots__ = ("path", "value", "clipped", "byte_offset", "byte_length")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_FIELD_NUMBER: _ClassVar[int]
    BYTE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BYTE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    path: str
    value: str
    clipped: bool
    byte_offset: int
    byte_length: int
    def __init__(self, path: _Optional[str] = ..., value: _Optional[str] = ..., clipped: _Optional[bool] = ..., byte_offset: _Optional[int] = ..., byte_length: _Optional[int] = ...) -> None: ...

class Lines(_message.Message):
    __slots__ = ("lines",)
    LINES_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedCompositeFieldContainer[Line]
    def __init__(self, lines: _Optional[_Iterable[_Union[Line, _Mapping]]] = ...) -> None: ...

class Line(_message.Message):
    __slots__ = ("number", "text", "clipped", "byte_offset")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_FIELD_NUMBER: _ClassVar[int]
    BYTE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    number: int
    text: str
    clipped: bool
    byte_offset: int
    def __init__(self, number: _Optional[int] = ..., text: _Optional[str] = ..., clipped: _Optional[bool] = ..., byte_offset: _Optional[int] = ...) -> None: ...

class Matches(_message.Message):
    __slots__ = ("matches",)
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[Match]
    def __init__(self, matches: _Optional[_Iterable[_Union[Match, _Mapping]]] = ...) -> None: ...

class Match(_message.Message):
    __slots__ = ("line", "before", "after")
    LINE_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    line: Line
    before: _containers.RepeatedCompositeFieldContainer[Line]
    after: _containers.RepeatedCompositeFieldContainer[Line]
    def __init__(self, line: _Optional[_Union[Line, _Mapping]] = ..., before: _Optional[_Iterable[_Union[Line, _Mapping]]] = ..., after: _Optional[_Iterable[_Union[Line, _Mapping]]] = ...) -> None: ...

class WindowTrailer(_message.Message):
    __slots__ = ("returned_lines", "returned_bytes", "returned_matches", "next_offset", "clipped", "eof", "total_matches", "rendered", "search_cursor")
    RETURNED_LINES_FIELD_NUMBER: _ClassVar[int]
    RETURNED_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETURNED_MATCHES_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MATCHES_FIELD_NUMBER: _ClassVar[int]
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    SEARCH_CURSOR_FIELD_NUMBER: _ClassVar[int]
    returned_lines: int
    returned_bytes: int
    returned_matches: int
    next_offset: int
    clipped: bool
    eof: bool
    total_matches: int
    rendered: str
    search_cursor: SearchCursor
    def __init__(self, returned_lines: _Optional[int] = ..., returned_bytes: _Optional[int] = ..., returned_matches: _Optional[int] = ..., next_offset: _Optional[int] = ..., clipped: _Optional[bool] = ..., eof: _Optional[bool] = ..., total_matches: _Optional[int] = ..., rendered: _Optional[str] = ..., search_cursor: _Optional[_Union[SearchCursor, _Mapping]] = ...) -> None: ...

class StatToolOutputRequest(_message.Message):
    __slots__ = ("run_id", "handle")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    handle: str
    def __init__(self, run_id: _Optional[str] = ..., handle: _Optional[str] = ...) -> None: ...

class StatToolOutputResponse(_message.Message):
    __slots__ = ("attachment",)
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    attachment: _types_pb2.ResultAttachment
    def __init__(self, attachment: _Optional[_Union[_types_pb2.ResultAttachment, _Mapping]] = ...) -> None: ...

class ListToolOutputsRequest(_message.Message):
    __slots__ = ("run_id", "page_size", "page_token")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    page_size: int
    page_token: str
    def __init__(self, run_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListToolOutputsResponse(_message.Message):
    __slots__ = ("attachments", "next_page_token")
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    attachments: _containers.RepeatedCompositeFieldContainer[_types_pb2.ResultAttachment]
    next_page_token: str
    def __init__(self, attachments: _Optional[_Iterable[_Union[_types_pb2.ResultAttachment, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunInfo]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[RunInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RunInfo(_message.Message):
    __slots__ = ("run_id", "output_count", "size_bytes", "create_time", "update_time", "expire_time", "parent_run_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    output_count: int
    size_bytes: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    parent_run_id: str
    def __init__(self, run_id: _Optional[str] = ..., output_count: _Optional[int] = ..., size_bytes: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_run_id: _Optional[str] = ...) -> None: ...

class DeleteRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class DeleteRunResponse(_message.Message):
    __slots__ = ("deleted_attachments",)
    DELETED_ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    deleted_attachments: int
    def __init__(self, deleted_attachments: _Optional[int] = ...) -> None: ...

class ForkRunRequest(_message.Message):
    __slots__ = ("parent_run_id", "child_run_id", "ttl")
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CHILD_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    parent_run_id: str
    child_run_id: str
    ttl: _duration_pb2.Duration
    def __init__(self, parent_run_id: _Optional[str] = ..., child_run_id: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ForkRunResponse(_message.Message):
    __slots__ = ("forked_attachments",)
    FORKED_ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    forked_attachments: int
    def __init__(self, forked_attachments: _Optional[int] = ...) -> None: ...

class MergeRunRequest(_message.Message):
    __slots__ = ("child_run_id", "parent_run_id")
    CHILD_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    child_run_id: str
    parent_run_id: str
    def __init__(self, child_run_id: _Optional[str] = ..., parent_run_id: _Optional[str] = ...) -> None: ...

class MergeRunResponse(_message.Message):
    __slots__ = ("merged_attachments", "unchanged_attachments")
    MERGED_ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    merged_attachments: int
    unchanged_attachments: int
    def __init__(self, merged_attachments: _Optional[int] = ..., unchanged_attachments: _Optional[int] = ...) -> None: ...

class SetRunTtlRequest(_message.Message):
    __slots__ = ("run_id", "ttl")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    ttl: _duration_pb2.Duration
    def __init__(self, run_id: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SetRunTtlResponse(_message.Message):
    __slots__ = ("expire_time",)
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("version", "backend", "limits", "caps", "features", "tenant")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    CAPS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    version: str
    backend: str
    limits: Limits
    caps: WindowCaps
    features: _containers.RepeatedScalarFieldContainer[str]
    tenant: str
    def __init__(self, version: _Optional[str] = ..., backend: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., caps: _Optional[_Union[WindowCaps, _Mapping]] = ..., features: _Optional[_Iterable[str]] = ..., tenant: _Optional[str] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_blob_bytes", "max_chunk_bytes", "inline_bytes", "max_pattern_bytes", "max_bytes_window", "max_run_bytes", "max_inflight_bytes", "max_calls_per_tenant", "request_deadline", "offload_idle_timeout", "max_inflight_bytes_per_tenant", "connection_idle_timeout", "keepalive_interval", "keepalive_timeout")
    MAX_BLOB_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    INLINE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PATTERN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_WINDOW_FIELD_NUMBER: _ClassVar[int]
    MAX_RUN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_INFLIGHT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CALLS_PER_TENANT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    OFFLOAD_IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_INFLIGHT_BYTES_PER_TENANT_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    max_blob_bytes: int
    max_chunk_bytes: int
    inline_bytes: int
    max_pattern_bytes: int
    max_bytes_window: int
    max_run_bytes: int
    max_inflight_bytes: int
    max_calls_per_tenant: int
    request_deadline: _duration_pb2.Duration
    offload_idle_timeout: _duration_pb2.Duration
    max_inflight_bytes_per_tenant: int
    connection_idle_timeout: _duration_pb2.Duration
    keepalive_interval: _duration_pb2.Duration
    keepalive_timeout: _duration_pb2.Duration
    def __init__(self, max_blob_bytes: _Optional[int] = ..., max_chunk_bytes: _Optional[int] = ..., inline_bytes: _Optional[int] = ..., max_pattern_bytes: _Optional[int] = ..., max_bytes_window: _Optional[int] = ..., max_run_bytes: _Optional[int] = ..., max_inflight_bytes: _Optional[int] = ..., max_calls_per_tenant: _Optional[int] = ..., request_deadline: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., offload_idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_inflight_bytes_per_tenant: _Optional[int] = ..., connection_idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., keepalive_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., keepalive_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WindowCaps(_message.Message):
    __slots__ = ("max_window_lines", "max_window_chars", "max_line_chars", "max_matches")
    MAX_WINDOW_LINES_FIELD_NUMBER: _ClassVar[int]
    MAX_WINDOW_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_LINE_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_MATCHES_FIELD_NUMBER: _ClassVar[int]
    max_window_lines: int
    max_window_chars: int
    max_line_chars: int
    max_matches: int
    def __init__(self, max_window_lines: _Optional[int] = ..., max_window_chars: _Optional[int] = ..., max_line_chars: _Optional[int] = ..., max_matches: _Optional[int] = ...) -> None: ...

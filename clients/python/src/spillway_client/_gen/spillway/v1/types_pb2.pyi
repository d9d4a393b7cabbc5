import datetime

from spillway_client._gen.buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JsonKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JSON_KIND_UNSPECIFIED: _ClassVar[JsonKind]
    JSON_KIND_DOCUMENT: _ClassVar[JsonKind]
    JSON_KIND_LINES: _ClassVar[JsonKind]

class Storage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STORAGE_UNSPECIFIED: _ClassVar[Storage]
    STORAGE_INLINE: _ClassVar[Storage]
    STORAGE_BLOB: _ClassVar[Storage]
    STORAGE_PREVIEW_ONLY: _ClassVar[Storage]
JSON_KIND_UNSPECIFIED: JsonKind
JSON_KIND_DOCUMENT: JsonKind
JSON_KIND_LINES: JsonKind
STORAGE_UNSPECIFIED: Storage
STORAGE_INLINE: Storage
STORAGE_BLOB: Storage
STORAGE_PREVIEW_ONLY: Storage

class BlobKey(_message.Message):
    __slots__ = ("tenant", "run_id", "call_id", "attempt")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    run_id: str
    call_id: str
    attempt: int
    def __init__(self, tenant: _Optional[str] = ..., run_id: _Optional[str] = ..., call_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class Preview(_message.Message):
    __slots__ = ("head", "tail", "shape", "line_count", "omitted_bytes", "binary", "text")
    HEAD_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    LINE_COUNT_FIELD_NUMBER: _ClassVar[int]
    OMITTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    head: str
    tail: str
    shape: str
    line_count: int
    omitted_bytes: int
    binary: bool
    text: str
    def __init__(self, head: _Optional[str] = ..., tail: _Optional[str] = ..., shape: _Optional[str] = ..., line_count: _Optional[int] = ..., omitted_bytes: _Optional[int] = ..., binary: _Optional[bool] = ..., text: _Optional[str] = ...) -> None: ...

class ResultAttachment(_message.Message):
    __slots__ = ("name", "handle", "content_type", "size_bytes", "observed_bytes", "truncated", "stored", "sha256", "readable", "preview", "line_count", "create_time", "expire_time", "key", "slot", "binary", "attempt", "json_kind", "json_view_lines")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    READABLE_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_FIELD_NUMBER: _ClassVar[int]
    LINE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JSON_KIND_FIELD_NUMBER: _ClassVar[int]
    JSON_VIEW_LINES_FIELD_NUMBER: _ClassVar[int]
    name: str
    handle: str
    content_type: str
    size_bytes: int
    observed_bytes: int
    truncated: bool
    stored: Storage
    sha256: str
    readable: bool
    preview: Preview
    line_count: int
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    key: BlobKey
    slot: str
    binary: bool
    attempt: int
    json_kind: JsonKind
    json_view_lines: int
    def __init__(self, name: _Optional[str] = ..., handle: _Optional[str] = ..., content_type: _Optional[str] = ..., size_bytes: _Optional[int] = ..., observed_bytes: _Optional[int] = ..., truncated: _Optional[bool] = ..., stored: _Optional[_Union[Storage, str]] = ..., sha256: _Optional[str] = ..., readable: _Optional[bool] = ..., preview: _Optional[_Union[Preview, _Mapping]] = ..., line_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., key: _Optional[_Union[BlobKey, _Mapping]] = ..., slot: _Optional[str] = ..., binary: _Optional[bool] = ..., attempt: _Optional[int] = ..., json_kind: _Optional[_Union[JsonKind, str]] = ..., json_view_lines: _Optional[int] = ...) -> None: ...

class ErrorInfo(_message.Message):
    __slots__ = ("reason", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REASON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    reason: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, reason: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

"""Reading Spillway's machine-readable error details from a gRPC error."""

from __future__ import annotations

from typing import cast

import grpc
from google.protobuf.any_pb2 import Any as AnyPb

from spillway_client._gen.spillway.v1 import types_pb2 as types_pb

_DETAILS_KEY = "grpc-status-details-bin"
_ERROR_INFO_TYPE = "spillway.v1.ErrorInfo"


_CODES = {code.value[0]: code for code in grpc.StatusCode}


class StatusError(grpc.RpcError):
    """StatusError is a status the SDK reports itself: a `grpc.RpcError` with `code()` and
    `details()` and no trailing metadata, so code that handles a failed call handles it unchanged."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self._code = code
        self._details = message

    def code(self) -> grpc.StatusCode:
        """code is the status's gRPC code."""
        return self._code

    def details(self) -> str:
        """details is the status message."""
        return self._details

    def trailing_metadata(self) -> tuple[()]:
        """trailing_metadata is empty: the status carries no details."""
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._code.name}, {self._details!r})"


def closed_client_error() -> StatusError:
    """closed_client_error is what an async client's call in flight raises when the client is
    closed under it: CANCELLED, where grpc.aio raises asyncio.CancelledError in the caller's task."""
    return StatusError(grpc.StatusCode.CANCELLED, "the client was closed while the call was in flight")


class BatchItemError(StatusError):
    """BatchItemError is one OffloadBatch item's failure: the status its own Offload would have had.

    Nothing of the item was committed.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(_CODES.get(code, grpc.StatusCode.UNKNOWN), message)


class DataLossError(StatusError):
    """DataLossError fails a verified `read_bytes` whose bytes do not match the record.

    Its code is DATA_LOSS, raised after the last byte was yielded: the bytes read back differ in
    size or sha256 from what the server recorded at offload.
    """

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.DATA_LOSS, message)


def error_info(err: grpc.RpcError) -> types_pb.ErrorInfo | None:
    """error_info returns the `spillway.v1.ErrorInfo` detail of a failed call, or None.

    The detail travels in the `grpc-status-details-bin` trailer as a `google.rpc.Status`, whose
    `details` (field 3) are `Any` messages; the Status is decoded by hand because the protobuf
    runtime does not ship google.rpc.
    """
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    # grpc's stubs type the items as objects with .key and .value; they are (key, value) tuples.
    for key, value in cast("tuple[tuple[str, str | bytes], ...]", trailing or ()):
        if key != _DETAILS_KEY or not isinstance(value, bytes):
            continue
        for detail in _status_details(value):
            if detail.type_url.rsplit("/", 1)[-1] == _ERROR_INFO_TYPE:
                info = types_pb.ErrorInfo()
                detail.Unpack(info)
                return info
    return None


def error_reason(err: grpc.RpcError) -> str | None:
    """error_reason returns the ErrorInfo reason of a failed call (e.g. `invalid_deferred_handle`), or None."""
    info = error_info(err)
    return info.reason if info is not None else None


def _status_details(status: bytes) -> list[AnyPb]:
    details: list[AnyPb] = []
    pos = 0
    while pos < len(status):
        tag, pos = _varint(status, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = _varint(status, pos)
        elif wire == 2:
            size, pos = _varint(status, pos)
            if field == 3:
                details.append(AnyPb.FromString(status[pos : pos + size]))
            pos += size
        else:
            # google.rpc.Status has only varint and length-delimited fields.
            break
    return details


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint in grpc-status-details-bin")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7

from spillway_client._gen.buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
SEGMENT_FIELD_NUMBER: _ClassVar[int]
segment: _descriptor.FieldDescriptor

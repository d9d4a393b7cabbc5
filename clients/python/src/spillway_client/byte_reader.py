"""The state of a bulk byte read that resumes where a failed attempt stopped."""

from __future__ import annotations

import hashlib

import grpc

from spillway_client import _messages as msg
from spillway_client._gen.spillway.v1 import spillway_pb2 as pb
from spillway_client.errors import DataLossError
from spillway_client.retry import RetryBudget


class ByteRead:
    """ByteRead tracks one `read_bytes` call for the blocking and the asyncio client alike.

    It builds each bytes-mode window request from the first byte not yet yielded, takes the data
    out of each frame, decides after a window whether another follows, and after a failure
    whether to try again: a transient failure is retried under the budget's policy, its attempts
    counted in a row without progress (afresh once bytes arrive), within the read's deadline. A
    verified read also hashes every byte it hands out and checks the total at the end.
    """

    def __init__(
        self,
        run_id: str,
        handle: str,
        offset: int,
        length: int | None,
        budget: RetryBudget,
        verify: bool = False,
    ) -> None:
        if offset < 0 or (length is not None and length < 0):
            raise ValueError("read_bytes takes a non-negative offset and length")
        if verify and (offset != 0 or length is not None):
            raise ValueError("read_bytes verifies a whole payload; drop offset and length")
        self._run_id = run_id
        self._handle = handle
        self.position = offset
        self._end = None if length is None else offset + length
        self._budget = budget
        self._failures = 0
        self._window_start = offset
        self._trailer: pb.WindowTrailer | None = None
        self._expected: tuple[int, str] | None = None
        self._hash: hashlib._Hash | None = None

    def expect(self, size: int, sha256: str) -> None:
        """expect makes the read check its bytes against a record's size and sha256 when it ends."""
        self._expected = (size, sha256)
        self._hash = hashlib.sha256()

    def more(self) -> bool:
        """more tells whether bytes of the range are still to be read."""
        return self._end is None or self.position < self._end

    def request(self) -> pb.ReadToolOutputRequest:
        """request starts a window at the first byte not yet yielded."""
        self._window_start = self.position
        self._trailer = None
        window: dict[str, int] = {"offset": self.position}
        if self._end is not None:
            window["limit"] = self._end - self.position
        return msg.read_request(self._run_id, self._handle, lines=None, bytes_=window, search=None, omit_rendered=True)

    def timeout(self) -> float | None:
        """timeout is the time left for the next attempt (None: no deadline); DEADLINE_EXCEEDED
        when none is left."""
        return self._budget.left()

    def take(self, frame: pb.ReadToolOutputResponse) -> bytes | None:
        """take returns a frame's data (and counts it as yielded), or None for other frames."""
        kind = frame.WhichOneof("frame")
        if kind == "trailer":
            self._trailer = frame.trailer
        if kind != "content" or frame.content.WhichOneof("body") != "data":
            return None
        data = frame.content.data
        self.position += len(data)
        if self._hash is not None:
            self._hash.update(data)
        return data

    def window_done(self) -> bool:
        """window_done is called after a window ended cleanly; True when the read is complete."""
        trailer = self._trailer
        if trailer is None:
            raise RuntimeError("the server ended a bytes window without its trailer")
        if trailer.eof or not trailer.HasField("next_offset"):
            self._check()
            return True
        if self.position == self._window_start:
            raise RuntimeError(
                f"the server returned an empty bytes window at {self.position}, before the payload's end"
            )
        if trailer.next_offset != self.position:
            raise RuntimeError(
                f"the server's bytes window ended at {self.position} but says the next starts at {trailer.next_offset}"
            )
        self._failures = 0
        return False

    def _check(self) -> None:
        """_check raises DataLossError when a verified read's bytes differ from the record."""
        if self._expected is None or self._hash is None:
            return
        size, sha256 = self._expected
        got = self._hash.hexdigest()
        if self.position != size or got != sha256:
            raise DataLossError(
                f"read_bytes: {self._handle} read back as {self.position} bytes with sha256 {got}, "
                f"but its record says {size} bytes with sha256 {sha256}"
            )

    def backoff(self, err: grpc.RpcError) -> float:
        """backoff returns the sleep before retrying a failed window, or re-raises err."""
        self._failures = 1 if self.position > self._window_start else self._failures + 1
        return self._budget.backoff(err, self._failures)

"""Window: one collected ReadToolOutput answer."""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway_client._gen.spillway.v1 import spillway_pb2 as pb


@dataclass(frozen=True)
class Window:
    """Window is a whole ReadToolOutput stream, collected in order.

    `rendered` is the server-rendered model text, byte for byte what every other SDK shows;
    `data` is the raw bytes of a bytes-mode window (empty in the other modes).
    """

    header: pb.WindowHeader | None
    frames: list[pb.ReadToolOutputResponse] = field(default_factory=list)
    trailer: pb.WindowTrailer | None = None

    @property
    def rendered(self) -> str:
        """rendered is the trailer's model-facing text, or "" when the stream had no trailer."""
        return self.trailer.rendered if self.trailer is not None else ""

    @property
    def data(self) -> bytes:
        """data joins the raw bytes of the window's content frames (bytes mode)."""
        return b"".join(f.content.data for f in self.frames if f.WhichOneof("frame") == "content")


def collect(frames: list[pb.ReadToolOutputResponse]) -> Window:
    """collect builds a Window from a stream's frames."""
    header = next((f.header for f in frames if f.WhichOneof("frame") == "header"), None)
    trailer = next((f.trailer for f in frames if f.WhichOneof("frame") == "trailer"), None)
    return Window(header=header, frames=frames, trailer=trailer)

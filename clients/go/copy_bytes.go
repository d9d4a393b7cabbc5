package spillway

import (
	"context"
	"fmt"
	"io"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/codes"
)

// CopyBytes writes the raw bytes of the output behind handle, from offset, to w as they come
// off the wire, and returns how many it wrote. limit nil copies to the end; otherwise at most
// *limit bytes. Unlike ReadBytes, which collects one window in memory (up to the server's
// max_bytes_window, 4 GiB by default), it holds one frame at a time, and it reads window after
// window when that cap ends one early. The windows are asked without rendered text. A write
// error of w ends the copy and is returned wrapped (errors.Is finds it); a failed call is a
// gRPC status error, after the bytes before it were written.
func (c *Client) CopyBytes(ctx context.Context, runID, handle string, w io.Writer, offset int64, limit *int64) (int64, error) {
	var written int64
	for {
		window := &spillwayv1.BytesWindow{Offset: offset + written}
		if limit != nil {
			left := *limit - written
			if left <= 0 {
				return written, nil
			}
			window.Limit = &left
		}
		_, trailer, err := c.streamWindow(ctx, &spillwayv1.ReadToolOutputRequest{
			RunId: runID, Handle: handle, OmitRendered: true,
			Window: &spillwayv1.ReadToolOutputRequest_Bytes{Bytes: window},
		}, func(content *spillwayv1.WindowContent) error {
			n, err := w.Write(content.GetData())
			written += int64(n)
			if err != nil {
				return fmt.Errorf("spillway: writing the bytes of %s: %w", handle, err)
			}
			return nil
		})
		if err != nil {
			return written, err
		}
		if trailer.GetEof() || trailer.NextOffset == nil {
			return written, nil
		}
		if trailer.GetNextOffset() != offset+written {
			return written, errorf(codes.Internal, "the server's window of %s ended at %d after %d bytes from %d",
				handle, trailer.GetNextOffset(), written, offset)
		}
	}
}

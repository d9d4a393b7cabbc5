package spillway

import (
	"context"
	"errors"
	"io"
	"iter"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/codes"
)

// Window is one whole ReadToolOutput answer, collected.
type Window struct {
	// Header holds the payload's totals and where the window starts.
	Header *spillwayv1.WindowHeader
	// Contents are the content frames in order: lines, raw bytes or matches.
	Contents []*spillwayv1.WindowContent
	// Trailer says how the window ended (next offset, eof, clipped, search cursor).
	Trailer *spillwayv1.WindowTrailer
	// Rendered is the server's model-facing text, exactly as the TypeScript and Python SDKs
	// show it; empty when the request set omit_rendered.
	Rendered string
}

// Data returns the raw bytes of a bytes-mode window, concatenated in order.
func (w *Window) Data() []byte {
	var out []byte
	for _, c := range w.Contents {
		out = append(out, c.GetData()...)
	}
	return out
}

// Lines returns the lines of a lines-mode window, in order.
func (w *Window) Lines() []*spillwayv1.Line {
	var out []*spillwayv1.Line
	for _, c := range w.Contents {
		out = append(out, c.GetLines().GetLines()...)
	}
	return out
}

// Matches returns the matches of a search window, in order.
func (w *Window) Matches() []*spillwayv1.Match {
	var out []*spillwayv1.Match
	for _, c := range w.Contents {
		out = append(out, c.GetMatches().GetMatches()...)
	}
	return out
}

// ReadToolOutput reads one bounded window of the output behind req.Handle, as run req.RunId
// resolves it, and collects its frames. A window the server ended without a trailer is
// codes.Internal.
func (c *Client) ReadToolOutput(ctx context.Context, req *spillwayv1.ReadToolOutputRequest) (*Window, error) {
	w := &Window{}
	header, trailer, err := c.streamWindow(ctx, req, func(content *spillwayv1.WindowContent) error {
		w.Contents = append(w.Contents, content)
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.Header, w.Trailer, w.Rendered = header, trailer, trailer.GetRendered()
	return w, nil
}

// streamWindow reads one window, handing each content frame to onContent as it comes off the
// wire, and returns the window's header and trailer. An onContent error ends the read and is
// returned as is; a window the server ended without a trailer is codes.Internal.
func (c *Client) streamWindow(
	ctx context.Context,
	req *spillwayv1.ReadToolOutputRequest,
	onContent func(*spillwayv1.WindowContent) error,
) (*spillwayv1.WindowHeader, *spillwayv1.WindowTrailer, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.raw.ReadToolOutput(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	var header *spillwayv1.WindowHeader
	var trailer *spillwayv1.WindowTrailer
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		switch frame := res.GetFrame().(type) {
		case *spillwayv1.ReadToolOutputResponse_Header:
			header = frame.Header
		case *spillwayv1.ReadToolOutputResponse_Content:
			if err := onContent(frame.Content); err != nil {
				return nil, nil, err
			}
		case *spillwayv1.ReadToolOutputResponse_Trailer:
			trailer = frame.Trailer
		}
	}
	if trailer == nil {
		return nil, nil, errorf(codes.Internal, "the server ended the window of %s without its trailer", req.GetHandle())
	}
	return header, trailer, nil
}

// ReadLines reads a window of whole lines; a nil window reads from the first line up to the
// server's cap.
func (c *Client) ReadLines(ctx context.Context, runID, handle string, window *spillwayv1.LinesWindow) (*Window, error) {
	if window == nil {
		window = &spillwayv1.LinesWindow{}
	}
	return c.ReadToolOutput(ctx, &spillwayv1.ReadToolOutputRequest{
		RunId: runID, Handle: handle, Window: &spillwayv1.ReadToolOutputRequest_Lines{Lines: window},
	})
}

// ReadBytes reads a window of raw bytes (Window.Data), collected in memory; the server's
// max_bytes_window (4 GiB by default) may end it early, and its trailer's NextOffset then says
// where the next starts. Without a Limit it collects up to that cap: use CopyBytes to stream a
// large payload's bytes to an io.Writer instead.
func (c *Client) ReadBytes(ctx context.Context, runID, handle string, window *spillwayv1.BytesWindow) (*Window, error) {
	if window == nil {
		window = &spillwayv1.BytesWindow{}
	}
	return c.ReadToolOutput(ctx, &spillwayv1.ReadToolOutputRequest{
		RunId: runID, Handle: handle, Window: &spillwayv1.ReadToolOutputRequest_Bytes{Bytes: window},
	})
}

// Search reads the lines matching window.Pattern (a literal, or RE2 with Regex set); page on
// with Skip set to the trailer's NextOffset and After to its SearchCursor.
func (c *Client) Search(ctx context.Context, runID, handle string, window *spillwayv1.SearchWindow) (*Window, error) {
	return c.ReadToolOutput(ctx, &spillwayv1.ReadToolOutputRequest{
		RunId: runID, Handle: handle, Window: &spillwayv1.ReadToolOutputRequest_Search{Search: window},
	})
}

// ListPage is one page of a run's records, in the server's listing order (see List).
type ListPage struct {
	// Attachments are the page's records.
	Attachments []*spillwayv1.ResultAttachment
	// NextPageToken fetches the next page; empty on the last page.
	NextPageToken string
}

// List returns one page of run runID's records: pageSize records (0: the server's default of
// 100; at most 1000) from pageToken ("" for the first page). Records come in the order of their
// stored keys: by escaped handle, each output's retries right after its first attempt, in
// attempt order.
func (c *Client) List(ctx context.Context, runID string, pageSize int32, pageToken string) (*ListPage, error) {
	res, err := c.raw.ListToolOutputs(ctx, &spillwayv1.ListToolOutputsRequest{
		RunId: runID, PageSize: pageSize, PageToken: pageToken,
	})
	if err != nil {
		return nil, err
	}
	return &ListPage{Attachments: res.GetAttachments(), NextPageToken: res.GetNextPageToken()}, nil
}

// ListAll yields every record of run runID in List's order, fetching pages of pageSize as it
// goes. A failed page yields its error once and ends the sequence.
func (c *Client) ListAll(ctx context.Context, runID string, pageSize int32) iter.Seq2[*spillwayv1.ResultAttachment, error] {
	return func(yield func(*spillwayv1.ResultAttachment, error) bool) {
		token := ""
		for {
			page, err := c.List(ctx, runID, pageSize, token)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, a := range page.Attachments {
				if !yield(a, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			token = page.NextPageToken
		}
	}
}

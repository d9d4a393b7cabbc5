package spillway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ChunkBytes is the size of the chunks Offload streams, as the TypeScript SDK sends them.
const ChunkBytes = 1 << 20

// Key is the address of an offload: the caller's tenant, the run, the tool call and, for a
// retried call, the attempt.
type Key struct {
	// Tenant must equal the tenant of the caller's token ("dev" for a dev-mode server).
	Tenant string
	// RunID is the agent run (conversation) the output belongs to.
	RunID string
	// CallID is the tool call that produced the output.
	CallID string
	// Attempt is which attempt of the call this is: 0 or 1 for the first, 2 to 1000 for
	// retries. Each attempt is its own output with its own handle (`res@<n>_<call_id>` from 2
	// on; the first keeps `res_<call_id>`), so a retry never collides with an earlier attempt.
	Attempt int32
}

// OffloadOptions are the header fields besides the key; the zero value offloads a plain tool
// result.
type OffloadOptions struct {
	// Slot is the attachment slot (`stdout`, `stderr`, `value`, `file:<path>`); empty for a
	// plain result.
	Slot string
	// Name is a display name, for example the tool's name.
	Name string
	// ContentType is the payload's MIME type; `application/json` enables the JSON preview.
	ContentType string
	// ExpectedSize, when set, must equal the committed size or nothing is committed
	// (codes.InvalidArgument). When nil and the reader has a Len() int method (bytes.Reader,
	// bytes.Buffer, strings.Reader), Offload announces that length, so a server refuses a
	// payload over its limits before the bytes are sent.
	ExpectedSize *int64
	// ExpectedSHA256, when set (lowercase hex), must equal the committed SHA-256 or nothing is
	// committed (codes.DataLoss).
	ExpectedSHA256 string
	// ObservedBytes is how many bytes the tool produced before any producer-side truncation;
	// nil means the size.
	ObservedBytes *int64
	// Truncated says the producer stopped capturing at a limit.
	Truncated bool
	// TTL is the attachment's time to live; zero keeps it until its run is deleted.
	TTL time.Duration
	// PreviewOnly keeps only the record, digest and preview (the output is then not readable).
	PreviewOnly bool
	// HeadChars and TailChars bound the server's preview; nil keeps its defaults (400, 200).
	HeadChars, TailChars *int32
	// KeepAnsi keeps terminal escape sequences in the preview; by default they are removed.
	KeepAnsi bool
}

// OffloadResult is a committed record and whether this call created it.
type OffloadResult struct {
	// Attachment is the committed record; its Handle is what the model passes back.
	Attachment *spillwayv1.ResultAttachment
	// Created is false when an identical earlier offload had already committed it.
	Created bool
}

// Offload streams everything r yields into storage under key: the header first, then the
// bytes in ChunkBytes chunks, and returns the committed record. Nothing is visible until the
// whole stream commits. The same key with the same bytes returns the same record (Created
// false); different bytes for a committed key is codes.AlreadyExists. A failure of r cancels
// the stream (nothing is committed) and is returned wrapped, so errors.Is finds it and
// status.Code reports codes.Unknown. ctx is checked between two reads of r, so a reader that
// trickles bytes cannot hold the call past its deadline (codes.DeadlineExceeded or
// codes.Canceled, nothing committed); a Read that blocks is only left when it returns.
func (c *Client) Offload(ctx context.Context, key Key, r io.Reader, opts *OffloadOptions) (*OffloadResult, error) {
	if opts == nil {
		opts = &OffloadOptions{}
	}
	header := offloadHeader(key, opts)
	if header.ExpectedSize == nil {
		if sized, ok := r.(interface{ Len() int }); ok {
			n := int64(sized.Len())
			header.ExpectedSize = &n
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.raw.Offload(ctx)
	if err != nil {
		return nil, err
	}
	send := func(req *spillwayv1.OffloadRequest) error {
		err := stream.Send(req)
		if errors.Is(err, io.EOF) {
			// The server ended the call early; its status says why.
			_, err = stream.CloseAndRecv()
			if err == nil {
				err = errorf(codes.Internal, "the server answered an offload before its end")
			}
		}
		return err
	}
	if err := send(&spillwayv1.OffloadRequest{Msg: &spillwayv1.OffloadRequest_Header{Header: header}}); err != nil {
		return nil, err
	}
	// Send serializes the message before it returns, so one buffer serves every chunk.
	buf := make([]byte, ChunkBytes)
	for {
		n, readErr := fill(ctx, r, buf)
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(readErr, ctxErr) {
			// The caller's deadline or cancellation. Never half-close here: the stream ends
			// with the reset the done context sends, so the bytes sent so far are not committed.
			return nil, status.FromContextError(ctxErr).Err()
		}
		if n > 0 {
			if err := send(&spillwayv1.OffloadRequest{Msg: &spillwayv1.OffloadRequest_Chunk{Chunk: buf[:n]}}); err != nil {
				return nil, err
			}
		}
		if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF) {
			break
		}
		if readErr != nil {
			// The deferred cancel resets the stream, so nothing read so far is committed.
			return nil, fmt.Errorf("spillway: reading the payload of %s/%s: %w", key.RunID, key.CallID, readErr)
		}
	}
	res, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	if res.GetAttachment() == nil {
		return nil, errorf(codes.Internal, "the server returned no attachment")
	}
	return &OffloadResult{Attachment: res.GetAttachment(), Created: res.GetCreated()}, nil
}

// fill reads r into buf until buf is full, r ends (io.EOF or io.ErrUnexpectedEOF, as
// io.ReadFull reports it) or ctx is done between two reads (ctx.Err()), so a reader that
// trickles a few bytes at a time cannot hold an offload past its deadline.
func fill(ctx context.Context, r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := r.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return 0, io.EOF
			}
			return n, io.ErrUnexpectedEOF
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func offloadHeader(key Key, opts *OffloadOptions) *spillwayv1.OffloadHeader {
	header := &spillwayv1.OffloadHeader{
		Key:           &spillwayv1.BlobKey{Tenant: key.Tenant, RunId: key.RunID, CallId: key.CallID, Attempt: key.Attempt},
		Name:          opts.Name,
		ContentType:   opts.ContentType,
		ExpectedSize:  opts.ExpectedSize,
		ObservedBytes: opts.ObservedBytes,
		Truncated:     opts.Truncated,
		PreviewOnly:   opts.PreviewOnly,
	}
	if opts.Slot != "" {
		header.Slot = &opts.Slot
	}
	if opts.ExpectedSHA256 != "" {
		header.ExpectedSha256 = &opts.ExpectedSHA256
	}
	if opts.TTL > 0 {
		header.Ttl = durationpb.New(opts.TTL)
	}
	if opts.HeadChars != nil || opts.TailChars != nil || opts.KeepAnsi {
		header.Preview = &spillwayv1.PreviewOptions{HeadChars: opts.HeadChars, TailChars: opts.TailChars, KeepAnsi: opts.KeepAnsi}
	}
	return header
}

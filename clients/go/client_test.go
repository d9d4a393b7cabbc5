package spillway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// countingReader yields its bytes in small reads of unknown total length, as a pipe would.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p[:min(len(p), 64<<10)])
}

// TestOffloadStreamsAReaderAndCommitsItsExactBytes: a multi-chunk payload from a reader of
// unknown length commits its exact size and SHA-256, and reads back byte for byte.
func TestOffloadStreamsAReaderAndCommitsItsExactBytes(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	var payload bytes.Buffer
	for i := 1; payload.Len() < 3*spillway.ChunkBytes+12345; i++ {
		fmt.Fprintf(&payload, "line %d of a large tool output\n", i)
	}
	want := payload.Bytes()
	src := &countingReader{r: bytes.NewReader(want)}
	res, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "big"}, src,
		&spillway.OffloadOptions{Name: "shell", ContentType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)
	a := res.Attachment
	if !res.Created || a.GetHandle() != "res_big" || a.GetSizeBytes() != int64(len(want)) || a.GetSha256() != hex.EncodeToString(sum[:]) {
		t.Fatalf("record %v created=%v; want res_big, %d bytes, sha256 %x", a, res.Created, len(want), sum)
	}
	if src.reads < len(want)/(64<<10) {
		t.Fatalf("the reader was read %d times; a streamed offload reads all of it", src.reads)
	}
	var got []byte
	for offset := int64(0); ; {
		w, err := c.ReadBytes(ctx, runID, "res_big", &spillwayv1.BytesWindow{Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, w.Data()...)
		if w.Trailer.GetEof() {
			break
		}
		offset = w.Trailer.GetNextOffset()
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, differing from the %d offloaded", len(got), len(want))
	}
}

// TestOffloadIsIdempotentAndRefusesOtherBytes: the same bytes again return the same record
// (not created); other bytes under the key are AlreadyExists.
func TestOffloadIsIdempotentAndRefusesOtherBytes(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	key := spillway.Key{Tenant: "dev", RunID: runID, CallID: "once"}
	first, err := c.Offload(ctx, key, strings.NewReader("hello\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Offload(ctx, key, strings.NewReader("hello\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || again.Created || !proto.Equal(first.Attachment, again.Attachment) {
		t.Fatalf("first %v (created %v), again %v (created %v)", first.Attachment, first.Created, again.Attachment, again.Created)
	}
	_, err = c.Offload(ctx, key, strings.NewReader("other\n"), nil)
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("other bytes under a committed key: %v, want AlreadyExists", err)
	}
}

// TestRetriesAreTheirOwnAttempts: an attempt of 2 or more commits its own output under
// `res@<n>_<call>`, readable beside the first attempt and listed right after it; the same bytes
// for the same attempt replay, other bytes are AlreadyExists.
func TestRetriesAreTheirOwnAttempts(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	first, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "c"}, strings.NewReader("first\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	retry := spillway.Key{Tenant: "dev", RunID: runID, CallID: "c", Attempt: 2}
	second, err := c.Offload(ctx, retry, strings.NewReader("second\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Attachment.GetHandle() != "res_c" || first.Attachment.GetAttempt() != 1 {
		t.Fatalf("first attempt: handle %q attempt %d", first.Attachment.GetHandle(), first.Attachment.GetAttempt())
	}
	if second.Attachment.GetHandle() != "res@2_c" || second.Attachment.GetAttempt() != 2 || !second.Created {
		t.Fatalf("retry: handle %q attempt %d created %v", second.Attachment.GetHandle(), second.Attachment.GetAttempt(), second.Created)
	}
	if !strings.Contains(second.Attachment.GetPreview().GetText(), "attempt 2") {
		t.Fatalf("retry preview does not name its attempt: %q", second.Attachment.GetPreview().GetText())
	}
	again, err := c.Offload(ctx, retry, strings.NewReader("second\n"), nil)
	if err != nil || again.Created {
		t.Fatalf("replay of the retry: %v (created %v)", err, again != nil && again.Created)
	}
	if _, err := c.Offload(ctx, retry, strings.NewReader("other\n"), nil); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("other bytes for a committed attempt: %v, want AlreadyExists", err)
	}
	for handle, want := range map[string]string{"res_c": "first", "res@2_c": "second"} {
		w, err := c.ReadToolOutput(ctx, &spillwayv1.ReadToolOutputRequest{RunId: runID, Handle: handle})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(w.Rendered, want) {
			t.Fatalf("%s renders %q, want %q in it", handle, w.Rendered, want)
		}
	}
	page, err := c.List(ctx, runID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var handles []string
	for _, a := range page.Attachments {
		handles = append(handles, a.GetHandle())
	}
	if strings.Join(handles, ",") != "res_c,res@2_c" {
		t.Fatalf("listed %v, want [res_c res@2_c]", handles)
	}
}

// TestOffloadChecksExpectedSizeAndDigest: a declared size or SHA-256 the bytes do not match
// commits nothing, with the documented codes; a reader's failure is returned and commits
// nothing either.
func TestOffloadChecksExpectedSizeAndDigest(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	size := int64(3)
	_, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "size"},
		io.MultiReader(strings.NewReader("four")), &spillway.OffloadOptions{ExpectedSize: &size})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("wrong expected size: %v, want InvalidArgument", err)
	}
	_, err = c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "digest"},
		strings.NewReader("four"), &spillway.OffloadOptions{ExpectedSHA256: strings.Repeat("0", 64)})
	if status.Code(err) != codes.DataLoss {
		t.Fatalf("wrong expected sha256: %v, want DataLoss", err)
	}
	broken := errors.New("the tool's pipe broke")
	_, err = c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "broken"},
		io.MultiReader(strings.NewReader("partial"), errReader{broken}), nil)
	if !errors.Is(err, broken) {
		t.Fatalf("a failing reader: %v, want it wrapped", err)
	}
	for _, handle := range []string{"res_size", "res_digest", "res_broken"} {
		if _, err := c.Stat(ctx, runID, handle); !notRecorded(err) {
			t.Errorf("Stat(%s) after a failed offload: %v, want it unknown", handle, err)
		}
	}
}

// notRecorded: the server answers a handle its run does not hold (unknown, forged, deleted)
// with PermissionDenied and the invalid_deferred_handle reason.
func notRecorded(err error) bool {
	return status.Code(err) == codes.PermissionDenied && spillway.ErrorReason(err) == "invalid_deferred_handle"
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestWindowsReturnRenderedTextAndTrailer: lines, bytes and search windows carry the
// server's text and a trailer that says where the next window starts.
func TestWindowsReturnRenderedTextAndTrailer(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	var log strings.Builder
	for i := 1; i <= 300; i++ {
		if i%50 == 1 {
			fmt.Fprintf(&log, "ERROR step %d failed\n", i)
		} else {
			fmt.Fprintf(&log, "ok step %d\n", i)
		}
	}
	if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "log"}, strings.NewReader(log.String()), nil); err != nil {
		t.Fatal(err)
	}
	limit := int32(5)
	lines, err := c.ReadLines(ctx, runID, "res_log", &spillwayv1.LinesWindow{Offset: 10, Limit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	if got := lines.Lines(); len(got) != 5 || got[0].GetNumber() != 11 || got[0].GetText() != "ok step 11" {
		t.Fatalf("lines window: %v", got)
	}
	if lines.Header.GetTotalLines() != 300 || lines.Trailer.GetNextOffset() != 15 || lines.Trailer.GetEof() {
		t.Fatalf("lines header %v trailer %v", lines.Header, lines.Trailer)
	}
	if !strings.Contains(lines.Rendered, "    11\tok step 11\n") || !strings.Contains(lines.Rendered, "[more: offset=15]") {
		t.Fatalf("lines rendered %q", lines.Rendered)
	}
	blimit := int64(20)
	bw, err := c.ReadBytes(ctx, runID, "res_log", &spillwayv1.BytesWindow{Offset: 4, Limit: &blimit})
	if err != nil {
		t.Fatal(err)
	}
	if string(bw.Data()) != log.String()[4:24] || bw.Trailer.GetNextOffset() != 24 || bw.Rendered == "" {
		t.Fatalf("bytes window %q trailer %v", bw.Data(), bw.Trailer)
	}
	max := int32(2)
	sw, err := c.Search(ctx, runID, "res_log", &spillwayv1.SearchWindow{Pattern: "error", IgnoreCase: true, MaxMatches: &max})
	if err != nil {
		t.Fatal(err)
	}
	m := sw.Matches()
	if len(m) != 2 || m[1].GetLine().GetNumber() != 51 || sw.Trailer.GetNextOffset() != 2 || sw.Trailer.GetSearchCursor() == nil {
		t.Fatalf("search matches %v trailer %v", m, sw.Trailer)
	}
	next, err := c.Search(ctx, runID, "res_log", &spillwayv1.SearchWindow{
		Pattern: "error", IgnoreCase: true, MaxMatches: &max, Skip: 2, After: sw.Trailer.GetSearchCursor(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := next.Matches(); len(m) != 2 || m[0].GetLine().GetNumber() != 101 {
		t.Fatalf("the next search page: %v", m)
	}
}

// TestStatAndListPageThroughARun: Stat returns a record, List pages in the server's order, ListAll
// yields every record.
func TestStatAndListPageThroughARun(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	for i := range 5 {
		call := fmt.Sprintf("call-%d", i)
		if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: call}, strings.NewReader(call), nil); err != nil {
			t.Fatal(err)
		}
	}
	a, err := c.Stat(ctx, runID, "res_call-3")
	if err != nil {
		t.Fatal(err)
	}
	if a.GetSizeBytes() != 6 || a.GetKey().GetCallId() != "call-3" || !a.GetReadable() {
		t.Fatalf("Stat: %v", a)
	}
	page, err := c.List(ctx, runID, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Attachments) != 2 || page.Attachments[0].GetHandle() != "res_call-0" || page.NextPageToken == "" {
		t.Fatalf("first page: %v", page)
	}
	var handles []string
	for a, err := range c.ListAll(ctx, runID, 2) {
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, a.GetHandle())
	}
	if strings.Join(handles, ",") != "res_call-0,res_call-1,res_call-2,res_call-3,res_call-4" {
		t.Fatalf("ListAll: %v", handles)
	}
	if n, err := c.DeleteRun(ctx, runID); err != nil || n != 5 {
		t.Fatalf("DeleteRun: %d, %v", n, err)
	}
	if _, err := c.Stat(ctx, runID, "res_call-3"); !notRecorded(err) {
		t.Fatalf("Stat after DeleteRun: %v, want it unknown", err)
	}
}

// TestErrorsCarryTheStatusCode: refusals keep their gRPC code and the server's reason.
func TestErrorsCarryTheStatusCode(t *testing.T) {
	c, ctx := dial(t), testContext(t)
	_, err := c.ReadLines(ctx, "", "res_x", nil)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty run id: %v, want InvalidArgument", err)
	}
	_, err = c.Stat(ctx, newRunID(), "res_someone-else")
	if !notRecorded(err) {
		t.Fatalf("a forged handle: %v, want PermissionDenied with the invalid_deferred_handle reason", err)
	}
	if _, err := spillway.Dial("127.0.0.1:1"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Dial without a scheme: %v, want InvalidArgument", err)
	}
}

// TestTokenAuthenticatesAsItsTenant: against a server with a token file, WithToken sends the
// bearer token that maps the caller to its tenant; without it the call is Unauthenticated.
func TestTokenAuthenticatesAsItsTenant(t *testing.T) {
	sum := sha256.Sum256([]byte("go-secret"))
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(hex.EncodeToString(sum[:])+" tenant-go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, stop, err := startServer("--token-file", tokens)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx := testContext(t)
	authed, err := spillway.Dial(url, spillway.WithToken("go-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Close()
	res, err := authed.Offload(ctx, spillway.Key{Tenant: "tenant-go", RunID: "r", CallID: "c"}, strings.NewReader("x"), nil)
	if err != nil || res.Attachment.GetKey().GetTenant() != "tenant-go" {
		t.Fatalf("offload with the token: %v, %v", res, err)
	}
	anonymous, err := spillway.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer anonymous.Close()
	if _, err := anonymous.Stat(ctx, "r", "res_c"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call without the token: %v, want Unauthenticated", err)
	}
}

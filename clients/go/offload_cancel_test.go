package spillway_test

import (
	"context"
	"io"
	"testing"
	"time"

	spillway "github.com/spillway-dev/spillway/clients/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tricklingReader yields one line every interval, as the stdout pipe of a slow command does.
type tricklingReader struct {
	lines    int
	interval time.Duration
}

func (r *tricklingReader) Read(p []byte) (int, error) {
	if r.lines == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.interval)
	r.lines--
	return copy(p, "still building\n"), nil
}

// TestOffloadStopsAtItsDeadlineWhileTheReaderTrickles: a context deadline ends an offload of a
// slowly producing reader when it passes, not when the reader has filled a whole chunk or ended.
func TestOffloadStopsAtItsDeadlineWhileTheReaderTrickles(t *testing.T) {
	c, runID := dial(t), newRunID()
	ctx, cancel := context.WithTimeout(testContext(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "slow"},
		&tricklingReader{lines: 60, interval: 50 * time.Millisecond}, nil)
	elapsed := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("offload past its deadline: %v; want DeadlineExceeded", err)
	}
	if elapsed > time.Second {
		t.Fatalf("offload returned %v after a 300ms deadline; the reader trickled on for 3s", elapsed)
	}
	_, err = c.Stat(testContext(t), runID, "res_slow")
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("stat after a cancelled offload: %v; want nothing recorded", err)
	}
}

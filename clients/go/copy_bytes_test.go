package spillway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
)

// patternReader yields size bytes of a repeating pattern without holding them.
type patternReader struct{ size, at int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.at >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-r.at)
	for i := range n {
		p[i] = "spillway streams\n"[(r.at+i)%17]
	}
	r.at += n
	return int(n), nil
}

// peakWriter hashes what it is given and records the largest heap seen between writes.
type peakWriter struct {
	h     io.Writer
	n     int64
	peak  uint64
	stats runtime.MemStats
}

func (w *peakWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if w.n%(8<<20) < int64(len(p)) {
		runtime.ReadMemStats(&w.stats)
		w.peak = max(w.peak, w.stats.HeapInuse)
	}
	return w.h.Write(p)
}

// TestCopyBytesStreamsAPayloadWithoutHoldingIt: CopyBytes hands a large payload's bytes to a
// writer as they arrive, byte for byte, without collecting the payload in memory, and a range
// copies exactly that range.
func TestCopyBytesStreamsAPayloadWithoutHoldingIt(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	const size = 96 << 20
	if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "huge"}, &patternReader{size: size}, nil); err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	if _, err := io.Copy(want, &patternReader{size: size}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	h := sha256.New()
	w := &peakWriter{h: h}
	n, err := c.CopyBytes(ctx, runID, "res_huge", w, 0, nil)
	if err != nil || n != size {
		t.Fatalf("CopyBytes = %d, %v; want %d bytes", n, err, size)
	}
	if got, exp := hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(want.Sum(nil)); got != exp {
		t.Fatalf("sha256 %s; want %s", got, exp)
	}
	if grew := int64(w.peak) - int64(before.HeapInuse); grew > 32<<20 {
		t.Fatalf("the heap grew by %d MiB while copying a %d MiB payload; it was held whole", grew>>20, size>>20)
	}
	limit := int64(5)
	var part sinkBuffer
	if n, err := c.CopyBytes(ctx, runID, "res_huge", &part, 17*1000+9, &limit); err != nil || n != 5 || string(part) != "strea" {
		t.Fatalf("CopyBytes of a range = %d %q, %v; want 5 bytes \"strea\"", n, part, err)
	}
}

type sinkBuffer []byte

func (b *sinkBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// TestCopyBytesReadsOnPastTheServersWindowCap: against a server whose max_bytes_window is
// smaller than the payload, CopyBytes reads window after window and copies every byte once.
func TestCopyBytesReadsOnPastTheServersWindowCap(t *testing.T) {
	url, stop, err := startServer("--max-bytes-window", "100000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := spillway.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t)
	const size = 1_000_003
	if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: "r", CallID: "c"}, &patternReader{size: size}, nil); err != nil {
		t.Fatal(err)
	}
	var got sinkBuffer
	if n, err := c.CopyBytes(ctx, "r", "res_c", &got, 3, nil); err != nil || n != size-3 {
		t.Fatalf("CopyBytes = %d, %v; want %d", n, err, size-3)
	}
	want, _ := io.ReadAll(&patternReader{size: size})
	if string(got) != string(want[3:]) {
		t.Fatal("the bytes copied across capped windows differ from the payload")
	}
	limit := int64(250_000)
	got = nil
	if n, err := c.CopyBytes(ctx, "r", "res_c", &got, 10, &limit); err != nil || n != limit || string(got) != string(want[10:10+limit]) {
		t.Fatalf("CopyBytes of 250000 bytes across capped windows = %d, %v", n, err)
	}
}

// failingWriter takes up to room bytes, then fails every write.
type failingWriter struct{ room int }

var errWriterFull = errors.New("writer full")

func (w *failingWriter) Write(p []byte) (int, error) {
	n := min(len(p), w.room)
	w.room -= n
	if n < len(p) {
		return n, errWriterFull
	}
	return n, nil
}

// TestCopyBytesEndsAtAWriteError: a failing writer ends the copy; the error wraps the writer's
// (errors.Is finds it) and the count is the bytes the writer took.
func TestCopyBytesEndsAtAWriteError(t *testing.T) {
	c, ctx, runID := dial(t), testContext(t), newRunID()
	if _, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "full"}, &patternReader{size: 1 << 20}, nil); err != nil {
		t.Fatal(err)
	}
	n, err := c.CopyBytes(ctx, runID, "res_full", &failingWriter{room: 1000}, 0, nil)
	if !errors.Is(err, errWriterFull) || n != 1000 {
		t.Fatalf("CopyBytes = %d, %v; want 1000 bytes and the writer's error", n, err)
	}
}

package spillway_test

import (
	"bufio"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// establishedTo counts this machine's established TCP connections whose far end is port.
func establishedTo(t *testing.T, port int) int {
	t.Helper()
	count := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		lines := bufio.NewScanner(f)
		lines.Scan() // the header
		for lines.Scan() {
			fields := strings.Fields(lines.Text())
			remote := fields[2][strings.LastIndex(fields[2], ":")+1:]
			if p, err := strconv.ParseInt(remote, 16, 32); err == nil && int(p) == port && fields[3] == "01" {
				count++
			}
		}
		_ = f.Close()
	}
	return count
}

// togetherReader gives its first bytes, then waits until every reader of its group has been
// asked for more (each offload's call is open by then), then ends.
type togetherReader struct {
	first []byte
	group *sync.WaitGroup
	step  int
}

func (r *togetherReader) Read(p []byte) (int, error) {
	r.step++
	switch r.step {
	case 1:
		return copy(p, r.first), nil
	case 2:
		r.group.Done()
		r.group.Wait()
	}
	return 0, io.EOF
}

// offloadTogether offloads count outputs at once, every call open before any ends.
func offloadTogether(t *testing.T, c *spillway.Client, runID string, count int) {
	t.Helper()
	var group sync.WaitGroup
	group.Add(count)
	errs := make(chan error, count)
	for i := range count {
		go func() {
			key := spillway.Key{Tenant: "dev", RunID: runID, CallID: "c" + strconv.Itoa(i)}
			_, err := c.Offload(testContext(t), key, &togetherReader{first: []byte("out\n"), group: &group}, nil)
			errs <- err
		}()
	}
	for range count {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestOneConnectionForOneCallAtATimeAndUpToFourForMore: a client left at its default holds one
// connection while it makes one call at a time, and opens up to four for calls made at once.
func TestOneConnectionForOneCallAtATimeAndUpToFourForMore(t *testing.T) {
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	before := establishedTo(t, port)
	c := dial(t)
	for range 5 {
		if _, err := c.ServerInfo(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got := establishedTo(t, port) - before; got != 1 {
		t.Fatalf("one call at a time: %d connections, want 1", got)
	}
	offloadTogether(t, c, newRunID(), 4)
	if got := establishedTo(t, port) - before; got != 4 {
		t.Fatalf("four calls at once: %d connections, want 4", got)
	}
	two := dial(t, spillway.WithConnections(2))
	offloadTogether(t, two, newRunID(), 4)
	if got := establishedTo(t, port) - before; got != 6 {
		t.Fatalf("with WithConnections(2): %d connections in all, want 4 + 2", got)
	}
}

// TestConnectionsOutsideOneTo64AreRefused: Dial says InvalidArgument for 0 or 65 connections.
func TestConnectionsOutsideOneTo64AreRefused(t *testing.T) {
	for _, n := range []int{0, 65} {
		_, err := spillway.Dial(serverURL, spillway.WithConnections(n))
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("WithConnections(%d): %v, want InvalidArgument", n, err)
		}
	}
}

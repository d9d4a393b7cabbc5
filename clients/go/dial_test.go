package spillway_test

import (
	"context"
	"net"
	"net/url"
	"sync"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
	"google.golang.org/grpc"
)

// TestDialWithoutAPortUsesTheSchemesPort: `http://host` dials port 80 and `https://host` port
// 443, as a URL means (and as the TypeScript SDK dials it), not gRPC's default 443
// for both.
func TestDialWithoutAPortUsesTheSchemesPort(t *testing.T) {
	server, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var dialed []string
	redirect := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, "tcp", server.Host)
	})
	c, err := spillway.Dial("http://127.0.0.1", spillway.WithDialOptions(redirect))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ServerInfo(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) == 0 || dialed[0] != "127.0.0.1:80" {
		t.Fatalf("http://127.0.0.1 dialed %v; want 127.0.0.1:80", dialed)
	}
}

package spillway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	spillway "github.com/spillway-dev/spillway/clients/go"
)

// serverURL is the Spillway server every test talks to: SPILLWAY_URL when set (the vitest
// wrapper test/go-client.test.ts passes the server it started), else one `spillway serve
// --backend memory` that TestMain starts from the compiled server/dist/entry.cjs.
var serverURL string

func TestMain(m *testing.M) {
	serverURL = os.Getenv("SPILLWAY_URL")
	stop := func() {}
	if serverURL == "" {
		var err error
		serverURL, stop, err = startServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "go client tests need a Spillway server:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// startServer runs the compiled `spillway serve --backend memory` with extra flags on a free
// port and returns the URL it logs and how to stop it.
func startServer(flags ...string) (string, func(), error) {
	return startServerWithEnv(nil, flags...)
}

// startServerWithEnv is startServer with extra environment variables ("NAME=value").
func startServerWithEnv(env []string, flags ...string) (string, func(), error) {
	cli, err := filepath.Abs(filepath.Join("..", "..", "server", "dist", "entry.cjs"))
	if err != nil {
		return "", nil, err
	}
	if _, err := os.Stat(cli); err != nil {
		return "", nil, fmt.Errorf("%s is missing; build it with `npx tsc -b tsconfig.build.json`", cli)
	}
	cmd := exec.Command("node", append([]string{cli, "serve", "--backend", "memory", "--port", "0"}, flags...)...)
	cmd.Env = append(append(os.Environ(), "SPILLWAY_DRAIN_DELAY_MS=0"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		lines.Buffer(make([]byte, 1<<20), 1<<20)
		for lines.Scan() {
			var entry struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(lines.Bytes(), &entry) == nil && entry.URL != "" {
				found <- entry.URL
				break
			}
		}
		// Keeps draining the log so the server never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, out)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	select {
	case url := <-found:
		return url, stop, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("spillway serve did not log its URL within 30 s")
	}
}

// dial connects to the test server and closes the client when the test ends.
func dial(t *testing.T, opts ...spillway.Option) *spillway.Client {
	t.Helper()
	c, err := spillway.Dial(serverURL, opts...)
	if err != nil {
		t.Fatalf("Dial(%s): %v", serverURL, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testContext is bounded, so a hung server fails the test instead of the run.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var runs atomic.Int64

// newRunID is a run id no other test (nor an earlier run against the same server) uses.
func newRunID() string {
	return fmt.Sprintf("go-%d-%d", time.Now().UnixNano(), runs.Add(1))
}

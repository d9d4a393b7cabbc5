// Package spillway is a thin Go client for a Spillway server: it offloads large tool outputs
// (streamed from an io.Reader), reads them back in bounded windows whose model-facing text the
// server renders, and runs the `read_tool_output` model tool with the same arguments and text
// as the TypeScript and Python SDKs.
//
// Every error a call returns for a failed RPC is a gRPC status error: status.Code(err) gives
// its code (codes.NotFound, codes.InvalidArgument, ...), and ErrorReason(err) the server's
// machine-readable reason when it attached one.
package spillway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// maxReceiveBytes bounds one received message; a window is far smaller, a bytes window's data
// frame included.
const maxReceiveBytes = 64 << 20

// Client holds connections to one Spillway server (see WithConnections). It is safe for
// concurrent use; Close releases it.
type Client struct {
	conns *spreadConn
	raw   spillwayv1.SpillwayServiceClient
}

// Option configures Dial.
type Option func(*dialConfig)

type dialConfig struct {
	token       string
	tls         *tls.Config
	dialOptions []grpc.DialOption
	connections int
}

// WithToken sends `authorization: Bearer <token>` on every call. Omit it for a server in dev
// mode.
func WithToken(token string) Option {
	return func(c *dialConfig) { c.token = token }
}

// WithTLSConfig sets the TLS configuration of an `https://` base URL (a CA to trust instead of
// the system's, a client certificate for mTLS). Without it an `https://` URL uses the system's
// roots.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *dialConfig) { c.tls = cfg }
}

// WithConnections sets the most HTTP/2 connections the client holds, 1 to 64 (default 4). Each
// call starts on the one with the fewest calls open, and a connection dials with its first call,
// so a client making one call at a time holds one; `spillway serve` runs a worker a core and
// gives each connection to one worker, so calls made at once reach several. Dial refuses a
// count outside 1 to 64 with codes.InvalidArgument.
func WithConnections(n int) Option {
	return func(c *dialConfig) { c.connections = n }
}

// WithDialOptions adds gRPC dial options (interceptors, keepalive, ...) after the client's own.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *dialConfig) { c.dialOptions = append(c.dialOptions, opts...) }
}

// Dial connects to the server at baseURL, `http://host:port` (plaintext HTTP/2) or
// `https://host:port` (TLS); without a port, 80 and 443. It does not wait for the connection:
// the first call does. A malformed URL is a codes.InvalidArgument status error.
func Dial(baseURL string, opts ...Option) (*Client, error) {
	cfg := dialConfig{connections: defaultConnections}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.connections < 1 || cfg.connections > 64 {
		return nil, status.Errorf(codes.InvalidArgument, "spillway: connections must be from 1 to 64, got %d", cfg.connections)
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, status.Errorf(codes.InvalidArgument, "spillway: base URL %q is not http://host:port or https://host:port", baseURL)
	}
	target := u.Host
	if u.Port() == "" {
		// gRPC's resolver would default both schemes to 443.
		target = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	var creds credentials.TransportCredentials
	if u.Scheme == "https" {
		tlsCfg := cfg.tls
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(tlsCfg)
	} else {
		creds = insecure.NewCredentials()
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReceiveBytes)),
	}
	if cfg.token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer{token: cfg.token}))
	}
	dialOpts = append(dialOpts, cfg.dialOptions...)
	spread := &spreadConn{open: make([]int, cfg.connections)}
	for range cfg.connections {
		conn, err := grpc.NewClient(target, dialOpts...)
		if err != nil {
			_ = spread.Close()
			return nil, status.Errorf(codes.InvalidArgument, "spillway: dial %s: %v", baseURL, err)
		}
		spread.conns = append(spread.conns, conn)
	}
	return &Client{conns: spread, raw: spillwayv1.NewSpillwayServiceClient(spread)}, nil
}

// Close closes the connections; calls in flight fail with codes.Canceled.
func (c *Client) Close() error {
	return c.conns.Close()
}

// Raw returns the generated gRPC client on the same connections, for the RPCs this package does
// not wrap (OffloadBatch, ForkRun, SetRunTtl).
func (c *Client) Raw() spillwayv1.SpillwayServiceClient {
	return c.raw
}

// Stat returns the record behind handle, as run runID resolves it. A handle the run does not
// hold is codes.PermissionDenied with the reason `invalid_deferred_handle` (see ErrorReason).
func (c *Client) Stat(ctx context.Context, runID, handle string) (*spillwayv1.ResultAttachment, error) {
	res, err := c.raw.StatToolOutput(ctx, &spillwayv1.StatToolOutputRequest{RunId: runID, Handle: handle})
	if err != nil {
		return nil, err
	}
	if res.GetAttachment() == nil {
		return nil, status.Error(codes.Internal, "spillway: the server returned no attachment")
	}
	return res.GetAttachment(), nil
}

// ServerInfo returns the server's version, backend, limits, window caps and features.
func (c *Client) ServerInfo(ctx context.Context) (*spillwayv1.GetServerInfoResponse, error) {
	return c.raw.GetServerInfo(ctx, &spillwayv1.GetServerInfoRequest{})
}

// DeleteRun removes run runID's registry and the bytes no fork still uses; it returns how many
// records were removed.
func (c *Client) DeleteRun(ctx context.Context, runID string) (int64, error) {
	res, err := c.raw.DeleteRun(ctx, &spillwayv1.DeleteRunRequest{RunId: runID})
	if err != nil {
		return 0, err
	}
	return res.GetDeletedAttachments(), nil
}

// MergeRun brings the outputs forked run childRunID created into parentRunID, its fork parent,
// under the same handles, all or nothing, and returns how many the parent gained and how many it
// already held with the same bytes. codes.AlreadyExists (naming the handle) when the parent holds
// one of them with other bytes, codes.FailedPrecondition when parentRunID is not the child's fork
// parent, codes.NotFound for a missing child. Repeating it changes nothing (all unchanged).
func (c *Client) MergeRun(ctx context.Context, childRunID, parentRunID string) (merged, unchanged int64, err error) {
	res, err := c.raw.MergeRun(ctx, &spillwayv1.MergeRunRequest{ChildRunId: childRunID, ParentRunId: parentRunID})
	if err != nil {
		return 0, 0, err
	}
	return res.GetMergedAttachments(), res.GetUnchangedAttachments(), nil
}

// bearer adds the token to every call's metadata.
type bearer struct {
	token string
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false so that a token also reaches a plaintext server on a
// trusted network, as the TypeScript and Python SDKs allow.
func (b bearer) RequireTransportSecurity() bool {
	return false
}

// errorf is a status error of code with the package's prefix.
func errorf(code codes.Code, format string, args ...any) error {
	return status.Error(code, "spillway: "+fmt.Sprintf(format, args...))
}

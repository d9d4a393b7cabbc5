package spillway

import (
	"context"
	"sync"

	"google.golang.org/grpc"
)

// defaultConnections is how many connections a client may hold unless WithConnections says:
// enough to reach the workers of a small host's `spillway serve`, which runs one a core.
const defaultConnections = 4

// spreadConn is one grpc.ClientConnInterface over several connections to the same server. Each
// call starts on the connection with the fewest calls open (the first on a tie) and counts
// there until it finishes; a connection dials with its first call, so a client that makes one
// call at a time holds one. `spillway serve` gives each connection to one worker, so calls made
// at once reach several.
type spreadConn struct {
	conns []*grpc.ClientConn
	mu    sync.Mutex
	open  []int
}

// take counts a call on the least busy connection and returns it with what ends the count
// (once; later calls do nothing).
func (s *spreadConn) take() (*grpc.ClientConn, func()) {
	s.mu.Lock()
	at := 0
	for i := 1; i < len(s.open); i++ {
		if s.open[i] < s.open[at] {
			at = i
		}
	}
	s.open[at]++
	s.mu.Unlock()
	var once sync.Once
	return s.conns[at], func() {
		once.Do(func() {
			s.mu.Lock()
			s.open[at]--
			s.mu.Unlock()
		})
	}
}

// Invoke runs a unary call on the least busy connection.
func (s *spreadConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	conn, end := s.take()
	defer end()
	return conn.Invoke(ctx, method, args, reply, opts...)
}

// NewStream opens a stream on the least busy connection; it counts until the stream finishes
// (its status received, or its context done).
func (s *spreadConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	conn, end := s.take()
	stream, err := conn.NewStream(ctx, desc, method, append(opts, grpc.OnFinish(func(error) { end() }))...)
	if err != nil {
		end()
	}
	return stream, err
}

// Close closes every connection and returns the first error.
func (s *spreadConn) Close() error {
	var first error
	for _, conn := range s.conns {
		if err := conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

package spillway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	spillway "github.com/spillway-dev/spillway/clients/go"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// otlpSpan is one span as OTLP/HTTP JSON carries it.
type otlpSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Kind         int    `json:"kind"`
}

// otlpReceiver is a local OTLP/HTTP (JSON) trace receiver: every span posted to /v1/traces.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpSpan
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []otlpSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range body.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	w.Header().Set("content-type", "application/json")
	_, _ = w.Write([]byte("{}"))
}

// childOf waits (10 s at most) for the one server span whose parent is parent.
func (r *otlpReceiver) childOf(t *testing.T, parent trace.SpanContext) otlpSpan {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r.mu.Lock()
		var children []otlpSpan
		for _, s := range r.spans {
			if s.ParentSpanID == parent.SpanID().String() {
				children = append(children, s)
			}
		}
		r.mu.Unlock()
		if len(children) > 0 {
			if len(children) != 1 {
				t.Fatalf("%d server spans under %s, want 1", len(children), parent.SpanID())
			}
			return children[0]
		}
	}
	t.Fatalf("the server exported no span whose parent is %s", parent.SpanID())
	return otlpSpan{}
}

// TestTraceContext checks that otelgrpc's client handler, given to Dial through
// WithDialOptions, makes each call's client span the parent of the span a real `spillway serve`
// (with the documented preload, docs/tracing/otel-preload.mjs) exports.
func TestTraceContext(t *testing.T) {
	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	defer collector.Close()
	preload, err := filepath.Abs(filepath.Join("..", "..", "docs", "tracing", "otel-preload.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := startServerWithEnv([]string{
		"NODE_OPTIONS=--import " + preload,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + collector.URL + "/v1/traces",
		"OTEL_BSP_SCHEDULE_DELAY=50",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	c, err := spillway.Dial(url, spillway.WithDialOptions(grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(provider),
		otelgrpc.WithPropagators(propagation.TraceContext{}),
	))))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	ctx, app := provider.Tracer("agent-runtime").Start(testContext(t), "tool call")
	runID := newRunID()
	res, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: "c1"}, strings.NewReader(strings.Repeat("traced\n", 20_000)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, runID, res.Attachment.GetHandle()); err != nil {
		t.Fatal(err)
	}
	app.End()

	for _, method := range []string{"Offload", "StatToolOutput"} {
		var client sdktrace.ReadOnlySpan
		for _, s := range recorder.Ended() {
			if s.SpanKind() == trace.SpanKindClient && strings.HasSuffix(s.Name(), "/"+method) {
				client = s
			}
		}
		if client == nil {
			t.Fatalf("no client span for %s", method)
		}
		if client.Parent().SpanID() != app.SpanContext().SpanID() {
			t.Errorf("%s client span's parent = %s, want the application's span %s", method, client.Parent().SpanID(), app.SpanContext().SpanID())
		}
		server := receiver.childOf(t, client.SpanContext())
		if server.TraceID != app.SpanContext().TraceID().String() {
			t.Errorf("%s server span trace = %s, want %s", method, server.TraceID, app.SpanContext().TraceID())
		}
		if server.Name != "spillway.v1.SpillwayService/"+method || server.Kind != 2 {
			t.Errorf("%s server span = %+v, want a SERVER span named spillway.v1.SpillwayService/%s", method, server, method)
		}
	}
}

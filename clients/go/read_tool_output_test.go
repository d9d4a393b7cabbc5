package spillway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// toolLog offloads the log the TypeScript SDK's tool tests read: 300 lines, every 50th an
// ERROR line.
func toolLog(t *testing.T, c *spillway.Client) string {
	t.Helper()
	runID := newRunID()
	lines := make([]string, 300)
	for i := range lines {
		if i%50 == 0 {
			lines[i] = fmt.Sprintf("ERROR step %d failed", i+1)
		} else {
			lines[i] = fmt.Sprintf("ok step %d", i+1)
		}
	}
	_, err := c.Offload(testContext(t), spillway.Key{Tenant: "dev", RunID: runID, CallID: "log"},
		strings.NewReader(strings.Join(lines, "\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	return runID
}

// rendered reads a window with the generated client, independently of the executor.
func rendered(t *testing.T, c *spillway.Client, runID string, window *spillwayv1.ReadToolOutputRequest) string {
	t.Helper()
	req := proto.Clone(window).(*spillwayv1.ReadToolOutputRequest)
	req.RunId, req.Handle = runID, "res_log"
	w, err := c.ReadToolOutput(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return w.Rendered
}

func execute(t *testing.T, e *spillway.ReadToolOutputExecutor, args any) string {
	t.Helper()
	text, err := e.Execute(testContext(t), args)
	if err != nil {
		t.Fatalf("Execute(%v): %v", args, err)
	}
	return text
}

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

// TestReadToolOutputToolDefinition: the definition declares what the TS and Python SDKs do.
func TestReadToolOutputToolDefinition(t *testing.T) {
	def := spillway.ReadToolOutputTool()
	text, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Name       string `json:"name"`
		Parameters struct {
			Properties           map[string]map[string]any `json:"properties"`
			Required             []string                  `json:"required"`
			AdditionalProperties bool                      `json:"additionalProperties"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(text, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != "read_tool_output" || len(back.Parameters.Properties) != 14 ||
		strings.Join(back.Parameters.Required, ",") != "handle" || back.Parameters.AdditionalProperties ||
		back.Parameters.Properties["context"]["maximum"] != float64(20) || !strings.Contains(def.Description, "from_end") {
		t.Fatalf("definition: %s", text)
	}
}

// TestReadToolOutputToolDefinitionIsTheTSSDKs: the definition (description, every argument's
// schema and rules) is the compiled TypeScript SDK's readToolOutputTool, field for field, as the
// Python SDK's test pins its own.
func TestReadToolOutputToolDefinitionIsTheTSSDKs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	script := `import("@spillway/client").then((m) => process.stdout.write(JSON.stringify(m.readToolOutputTool)))`
	cmd := exec.Command("node", "-e", script)
	cmd.Dir = root
	tsText, err := cmd.Output()
	if err != nil {
		t.Fatalf("node could not load the TS SDK (build it with `npx tsc -b tsconfig.build.json`): %v", err)
	}
	goText, err := json.Marshal(spillway.ReadToolOutputTool())
	if err != nil {
		t.Fatal(err)
	}
	var ts, got any
	if err := json.Unmarshal(tsText, &ts); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(goText, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ts) {
		t.Fatalf("Go definition differs from the TS SDK's:\ngo: %s\nts: %s", goText, tsText)
	}
}

// TestReadToolOutputExecutorReturnsServerText: lines, tail, search and bytes arguments give
// exactly the text of the same window, whatever form the arguments come in.
func TestReadToolOutputExecutorReturnsServerText(t *testing.T) {
	c := dial(t)
	runID := toolLog(t, c)
	e := spillway.NewReadToolOutputExecutor(c, runID)
	cases := []struct {
		args   any
		window *spillwayv1.ReadToolOutputRequest
	}{
		{`{"handle":"res_log","offset":10,"limit":5}`, &spillwayv1.ReadToolOutputRequest{Window: &spillwayv1.ReadToolOutputRequest_Lines{Lines: &spillwayv1.LinesWindow{Offset: 10, Limit: i32(5)}}}},
		{map[string]any{"handle": "res_log", "limit": 3, "from_end": true}, &spillwayv1.ReadToolOutputRequest{Window: &spillwayv1.ReadToolOutputRequest_Lines{Lines: &spillwayv1.LinesWindow{Limit: i32(3), FromEnd: true}}}},
		{json.RawMessage(`{"handle":"res_log","pattern":"error step \\d+","regex":true,"ignore_case":true}`), &spillwayv1.ReadToolOutputRequest{Window: &spillwayv1.ReadToolOutputRequest_Search{Search: &spillwayv1.SearchWindow{Pattern: `error step \d+`, Regex: true, IgnoreCase: true}}}},
		{[]byte(`{"handle":"res_log","bytes":true,"offset":4,"limit":20}`), &spillwayv1.ReadToolOutputRequest{Window: &spillwayv1.ReadToolOutputRequest_Bytes{Bytes: &spillwayv1.BytesWindow{Offset: 4, Limit: i64(20)}}}},
		{struct {
			Handle string `json:"handle"`
			Mode   string `json:"mode"`
			Offset int    `json:"offset"`
			Limit  int    `json:"limit"`
		}{"res_log", "bytes", 4, 20}, &spillwayv1.ReadToolOutputRequest{Window: &spillwayv1.ReadToolOutputRequest_Bytes{Bytes: &spillwayv1.BytesWindow{Offset: 4, Limit: i64(20)}}}},
	}
	for _, tc := range cases {
		want := rendered(t, c, runID, tc.window)
		if got := execute(t, e, tc.args); got != want {
			t.Errorf("Execute(%v) = %q, want %q", tc.args, got, want)
		}
	}
	if text := execute(t, e, `{"handle":"res_log","limit":3,"from_end":true}`); !strings.Contains(text, "ok step 300") {
		t.Errorf("tail: %q", text)
	}
}

// TestReadToolOutputExecutorAnswersBadArgumentsInWords: bad arguments and refusals are one
// line for the model, worded as the TS and Python SDKs word them.
func TestReadToolOutputExecutorAnswersBadArgumentsInWords(t *testing.T) {
	c := dial(t)
	runID := toolLog(t, c)
	e := spillway.NewReadToolOutputExecutor(c, runID)
	for args, want := range map[string]string{
		`{}`:                               "error: handle must be a non-empty string",
		`{not json`:                        "error: arguments are not valid JSON",
		`["res_log"]`:                      "error: arguments must be an object with a handle",
		`{"handle":"res_log","offset":-1}`: "error: offset must be an integer >= 0",
		`{"handle":"res_log","limit":1.5}`: "error: limit must be an integer >= 1",
		`{"handle":"res_log","lines":3,"pages":1}`:          `error: unknown argument "lines"`,
		`{"handle":"res_log","regex":true}`:                 "error: regex needs a pattern",
		`{"handle":"res_log","context":21,"pattern":"x"}`:   "error: context must be an integer from 0 to 20",
		`{"handle":"res_log","pattern":"x","bytes":true}`:   "error: pattern cannot be combined with bytes, from_end or offset (use skip to page matches)",
		`{"handle":"res_log","bytes":true,"from_end":true}`: "error: from_end applies to lines, not bytes",
		`{"handle":"res_log","mode":"pages"}`:               `error: mode must be "lines", "bytes" or "json"`,
		`{"handle":"res_log","from_end":"yes"}`:             "error: from_end must be true or false",
		`{"handle":"res_log","jsonpath":"$","offset":1}`:    "error: jsonpath cannot be combined with offset (use skip and limit to page nodes)",
		`{"handle":"res_log","jsonpath":""}`:                "error: jsonpath must be a non-empty string",
		`{"handle":"res_log","jsonpath":"$[0]"}`:            "error: failed_precondition: not JSON: unexpected byte at byte 0",
		`{"handle":"res_log","jsonpath":"$[0"}`:             "error: invalid_argument: invalid JSONPath query at position 3: expected ',' or ']', found the end of the query",
	} {
		if got := execute(t, e, args); got != want {
			t.Errorf("Execute(%s) = %q, want %q", args, got, want)
		}
	}
	if got := execute(t, e, `{"handle":"res_someone-else"}`); !strings.HasPrefix(got, "error: invalid_deferred_handle: ") || strings.Contains(got, "[permission_denied]") {
		t.Errorf("a forged handle: %q", got)
	}
	if got := execute(t, e, `{"handle":"res_log","pattern":"(","regex":true}`); !strings.HasPrefix(got, "error: invalid_argument: ") {
		t.Errorf("a bad regex: %q", got)
	}
}

// TestReadToolOutputExecutorPagesASearchWithItsCursor: a later page sends the cursor of the
// search's last window, the text is the page skip alone selects, and going back or another
// pattern reads without it.
func TestReadToolOutputExecutorPagesASearchWithItsCursor(t *testing.T) {
	var mu sync.Mutex
	var sent []*spillwayv1.ReadToolOutputRequest
	record := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return recordingStream{ClientStream: s, record: func(m any) {
			if req, ok := m.(*spillwayv1.ReadToolOutputRequest); ok {
				mu.Lock()
				sent = append(sent, proto.Clone(req).(*spillwayv1.ReadToolOutputRequest))
				mu.Unlock()
			}
		}}, err
	}
	c := dial(t, spillway.WithDialOptions(grpc.WithStreamInterceptor(record)))
	runID := toolLog(t, c)
	e := spillway.NewReadToolOutputExecutor(c, runID)
	afterOf := func(k int) *spillwayv1.SearchCursor {
		mu.Lock()
		defer mu.Unlock()
		return sent[k].GetSearch().GetAfter()
	}
	var pages []string
	for _, skip := range []int{0, 2, 4} {
		pages = append(pages, execute(t, e, map[string]any{"handle": "res_log", "pattern": "ERROR", "context": 2, "limit": 2, "skip": skip}))
	}
	if afterOf(0) != nil {
		t.Errorf("the first page sent a cursor: %v", afterOf(0))
	}
	if a := afterOf(1); a.GetLine() != 50 || a.GetMatchesBefore() != 1 {
		t.Errorf("the second page's cursor: %v, want line 50, 1 match before", a)
	}
	if a := afterOf(2); a.GetLine() != 150 || a.GetMatchesBefore() != 3 {
		t.Errorf("the third page's cursor: %v, want line 150, 3 matches before", a)
	}
	plain := dial(t)
	for k, skip := range []int64{0, 2, 4} {
		want := rendered(t, plain, runID, &spillwayv1.ReadToolOutputRequest{Window: &spillwayv1.ReadToolOutputRequest_Search{
			Search: &spillwayv1.SearchWindow{Pattern: "ERROR", ContextLines: 2, MaxMatches: i32(2), Skip: skip},
		}})
		if pages[k] != want {
			t.Errorf("page %d with the cursor = %q, want %q", k, pages[k], want)
		}
	}
	if !strings.Contains(pages[2], "ERROR step 201") {
		t.Errorf("the third page: %q", pages[2])
	}
	mu.Lock()
	for k, req := range sent {
		if !req.GetRenderedOnly() {
			t.Errorf("read %d did not ask for the rendered text only", k)
		}
	}
	mu.Unlock()
	execute(t, e, map[string]any{"handle": "res_log", "pattern": "ERROR", "context": 2, "limit": 2, "skip": 0})
	execute(t, e, map[string]any{"handle": "res_log", "pattern": "ok", "context": 2, "limit": 2, "skip": 4})
	if afterOf(3) != nil || afterOf(4) != nil {
		t.Errorf("going back or another pattern sent a cursor: %v, %v", afterOf(3), afterOf(4))
	}
}

type recordingStream struct {
	grpc.ClientStream
	record func(any)
}

func (s recordingStream) SendMsg(m any) error {
	s.record(m)
	return s.ClientStream.SendMsg(m)
}

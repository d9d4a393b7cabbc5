package spillway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/status"
)

// ReadToolOutputToolName is the model tool's name; its results must never be offloaded again.
const ReadToolOutputToolName = "read_tool_output"

// ToolDefinition is a model tool as function-calling APIs declare it: a name, a description and
// a JSON Schema of its parameters.
type ToolDefinition struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// ReadToolOutputTool returns the `read_tool_output` definition, identical to the TypeScript and
// Python SDKs': `handle` is required and no other properties are allowed; `mode: "bytes"` is an
// alias of `bytes: true`, because the server's previews and hints spell bytes reads that way,
// and `mode: "json"` of `json: true`.
// Each call returns a fresh copy the caller may change.
func ReadToolOutputTool() ToolDefinition {
	prop := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	return ToolDefinition{
		Name: ReadToolOutputToolName,
		Description: strings.Join([]string{
			"Read a window of a large tool output that was stored instead of shown in full.",
			"Pass the handle from its preview (for example res_call-1).",
			"Lines: offset is the 0-based line to start at and limit the number of lines; with",
			"from_end=true both count back from the last line (a tail). Lines are numbered from 1 like",
			"`cat -n`, and every window ends with how to ask for the next one.",
			"Search: set pattern (a literal string, or an RE2 regular expression with regex=true;",
			"ignore_case, context lines around each match, skip matches already seen, limit matches).",
			"Bytes: bytes=true reads raw bytes (offset and limit are then bytes), for binary outputs",
			"and very long lines.",
			"JSON: json=true pages a JSON output pretty-printed, one member or element per line (JSON",
			"Lines: one record per line); offset, limit and from_end then count lines of that view.",
			"JSONPath: jsonpath runs an RFC 9535 JSONPath query (for example $.items[?@.status=='failed'].id)",
			"and returns the matched nodes' paths and values; skip and limit page them.",
			"The service caps every window, whatever limit you ask for.",
			"Terminal colour codes are removed from the text unless keep_ansi=true.",
		}, " "),
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"handle":      prop("type", "string", "description", "The output's handle, as shown in its preview."),
				"offset":      prop("type", "integer", "minimum", 0, "description", "0-based line (or byte, with bytes=true) to start at. Default 0."),
				"limit":       prop("type", "integer", "minimum", 1, "description", "Lines, bytes or matches to return; the service caps it."),
				"from_end":    prop("type", "boolean", "description", "Count offset and limit back from the last line."),
				"pattern":     prop("type", "string", "minLength", 1, "description", "Search for this text."),
				"regex":       prop("type", "boolean", "description", "Treat pattern as an RE2 regular expression."),
				"ignore_case": prop("type", "boolean", "description", "Match the pattern case-insensitively."),
				"context":     prop("type", "integer", "minimum", 0, "maximum", 20, "description", "Lines of context before and after each match."),
				"skip":        prop("type", "integer", "minimum", 0, "description", "Matches to skip (to page a search)."),
				"jsonpath":    prop("type", "string", "minLength", 1, "description", "An RFC 9535 JSONPath query over a JSON or JSON Lines output."),
				"bytes":       prop("type", "boolean", "description", "Read raw bytes; offset and limit are then bytes."),
				"json":        prop("type", "boolean", "description", "Read the JSON view; offset and limit are then lines of that view."),
				"mode":        prop("type", "string", "enum", []any{"lines", "bytes", "json"}, "description", `Same as bytes=true when "bytes", json=true when "json".`),
				"keep_ansi":   prop("type", "boolean", "description", "Keep terminal escape sequences (colour codes) in the text; by default they are removed."),
			},
			"required":             []any{"handle"},
			"additionalProperties": false,
		},
	}
}

// knownArguments are the tool's parameters.
var knownArguments = []string{
	"handle", "offset", "limit", "from_end", "pattern", "regex", "ignore_case", "context", "skip", "jsonpath", "bytes", "json", "mode",
	"keep_ansi",
}

// jsonPathExcludes are arguments of other windows, which a JSONPath query does not take.
var jsonPathExcludes = []string{"pattern", "regex", "ignore_case", "context", "offset", "from_end", "bytes", "json", "mode"}

// rememberedSearches is how many searches' last cursors an executor keeps.
const rememberedSearches = 64

// ReadToolOutputExecutor runs the `read_tool_output` tool for one run. It is safe for
// concurrent use.
type ReadToolOutputExecutor struct {
	client *Client
	runID  string

	mu      sync.Mutex
	cursors map[searchKey]*spillwayv1.SearchCursor
	order   []searchKey // least recently used first
}

type searchKey struct {
	handle, pattern             string
	regex, ignoreCase, keepAnsi bool
}

// NewReadToolOutputExecutor returns the tool's executor for run runID; the run comes from the
// runtime, never from the model.
func NewReadToolOutputExecutor(client *Client, runID string) *ReadToolOutputExecutor {
	return &ReadToolOutputExecutor{client: client, runID: runID, cursors: map[searchKey]*spillwayv1.SearchCursor{}}
}

// Execute runs the tool on the model's arguments and returns exactly the server-rendered window
// text. args is the arguments' JSON text (string, []byte or json.RawMessage) or any value that
// marshals to a JSON object (a map, a struct). Bad arguments and server refusals are not
// errors: they return one short line for the model starting with `error: `, worded as the
// TypeScript and Python SDKs word it (a forged handle gives `error: invalid_deferred_handle:
// …`). The text is already bounded by the server's caps and goes to the model as is. The error
// is non-nil only for a failure that is not a gRPC status (a programming fault).
//
// The model pages a search with `skip`, as the rendered text tells it. The executor keeps the
// trailer's search cursor of the last window of each search (handle, pattern, regex,
// ignore_case; the 64 most recent) and sends it with a later page whose skip is at or past it,
// so paging through every match reads the output about once instead of once per page. The text
// is the same either way; a cursor the server refuses is dropped and the page read again
// without it.
func (e *ReadToolOutputExecutor) Execute(ctx context.Context, args any) (string, error) {
	req, problem := ParseReadToolOutputArgs(args)
	if problem != "" {
		return "error: " + problem, nil
	}
	req.RunId = e.runID
	// The model is shown the rendered text alone: the window's lines or matches need not come too.
	req.RenderedOnly = true
	w, err := e.read(ctx, req)
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			return "", err
		}
		return "error: " + DescribeError(err), nil
	}
	return w.Rendered, nil
}

func (e *ReadToolOutputExecutor) read(ctx context.Context, req *spillwayv1.ReadToolOutputRequest) (*Window, error) {
	search := req.GetSearch()
	if search == nil {
		return e.client.ReadToolOutput(ctx, req)
	}
	key := searchKey{req.GetHandle(), search.GetPattern(), search.GetRegex(), search.GetIgnoreCase(), req.GetKeepAnsi()}
	known := e.cursor(key)
	if known != nil && known.GetMatchesBefore() <= search.GetSkip() {
		search.After = known
		w, err := e.client.ReadToolOutput(ctx, req)
		if err == nil || !strings.HasPrefix(status.Convert(err).Message(), "search.after:") {
			return e.remember(key, w, err)
		}
		e.forget(key)
		search.After = nil
	}
	w, err := e.client.ReadToolOutput(ctx, req)
	return e.remember(key, w, err)
}

func (e *ReadToolOutputExecutor) cursor(key searchKey) *spillwayv1.SearchCursor {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cursors[key]
}

func (e *ReadToolOutputExecutor) forget(key searchKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.cursors, key)
	e.order = slices.DeleteFunc(e.order, func(k searchKey) bool { return k == key })
}

// remember keeps the window's cursor as the most recently used one of its search.
func (e *ReadToolOutputExecutor) remember(key searchKey, w *Window, err error) (*Window, error) {
	if err != nil || w.Trailer.GetSearchCursor() == nil {
		return w, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.order = slices.DeleteFunc(e.order, func(k searchKey) bool { return k == key })
	e.order = append(e.order, key)
	e.cursors[key] = w.Trailer.GetSearchCursor()
	if len(e.order) > rememberedSearches {
		delete(e.cursors, e.order[0])
		e.order = e.order[1:]
	}
	return w, nil
}

// maxSafeInteger is the largest integer a JSON number holds exactly in JavaScript, which bounds
// the tool's integer arguments in every SDK.
const maxSafeInteger = 1<<53 - 1

// ParseReadToolOutputArgs maps the model's arguments (as Execute takes them) to a
// ReadToolOutputRequest without its run id, or returns a short sentence saying what is wrong,
// worded exactly as the TypeScript and Python SDKs word it.
func ParseReadToolOutputArgs(args any) (*spillwayv1.ReadToolOutputRequest, string) {
	var text []byte
	switch v := args.(type) {
	case string:
		text = []byte(v)
	case []byte:
		text = v
	case json.RawMessage:
		text = v
	default:
		var err error
		if text, err = json.Marshal(v); err != nil {
			return nil, "arguments are not valid JSON"
		}
	}
	var parsed any
	if err := json.Unmarshal(text, &parsed); err != nil {
		return nil, "arguments are not valid JSON"
	}
	a, ok := parsed.(map[string]any)
	if !ok {
		return nil, "arguments must be an object with a handle"
	}
	for _, k := range objectKeys(text) {
		if !slices.Contains(knownArguments, k) {
			return nil, "unknown argument " + jsonString(k)
		}
	}
	handle, ok := a["handle"].(string)
	if !ok || handle == "" {
		return nil, "handle must be a non-empty string"
	}
	for _, check := range []func() string{
		func() string { return checkInt(a, "offset", 0, maxSafeInteger) },
		func() string { return checkInt(a, "limit", 1, maxSafeInteger) },
		func() string { return checkInt(a, "context", 0, 20) },
		func() string { return checkInt(a, "skip", 0, maxSafeInteger) },
		func() string { return checkBool(a, "from_end") },
		func() string { return checkBool(a, "regex") },
		func() string { return checkBool(a, "ignore_case") },
		func() string { return checkBool(a, "bytes") },
		func() string { return checkBool(a, "json") },
		func() string { return checkBool(a, "keep_ansi") },
	} {
		if problem := check(); problem != "" {
			return nil, problem
		}
	}
	if mode, present := a["mode"]; present && mode != "lines" && mode != "bytes" && mode != "json" {
		return nil, `mode must be "lines", "bytes" or "json"`
	}
	offset, hasOffset := intArg(a, "offset")
	limit, hasLimit := intArg(a, "limit")
	// Lines and matches limits are int32 on the wire; the server caps windows far below anyway.
	var smallLimit *int32
	if hasLimit {
		n := int32(min(limit, math.MaxInt32))
		smallLimit = &n
	}
	asBytes := a["bytes"] == true || a["mode"] == "bytes"
	asJSON := a["json"] == true || a["mode"] == "json"
	if asBytes && asJSON {
		return nil, "bytes and json cannot be combined"
	}
	_, hasFromEnd := a["from_end"]
	req := &spillwayv1.ReadToolOutputRequest{Handle: handle, KeepAnsi: a["keep_ansi"] == true}
	if query, present := a["jsonpath"]; present {
		q, ok := query.(string)
		if !ok || q == "" {
			return nil, "jsonpath must be a non-empty string"
		}
		for _, k := range jsonPathExcludes {
			if _, other := a[k]; other {
				return nil, "jsonpath cannot be combined with " + k + " (use skip and limit to page nodes)"
			}
		}
		skip, _ := intArg(a, "skip")
		req.Window = &spillwayv1.ReadToolOutputRequest_JsonPath{JsonPath: &spillwayv1.JsonPathWindow{
			Query:      q,
			MaxMatches: smallLimit,
			Skip:       skip,
		}}
		return req, ""
	}
	if pattern, present := a["pattern"]; present {
		p, ok := pattern.(string)
		if !ok || p == "" {
			return nil, "pattern must be a non-empty string"
		}
		if asJSON {
			return nil, "pattern cannot be combined with json"
		}
		if asBytes || hasFromEnd || hasOffset {
			return nil, "pattern cannot be combined with bytes, from_end or offset (use skip to page matches)"
		}
		skip, _ := intArg(a, "skip")
		contextLines, _ := intArg(a, "context")
		req.Window = &spillwayv1.ReadToolOutputRequest_Search{Search: &spillwayv1.SearchWindow{
			Pattern:      p,
			Regex:        a["regex"] == true,
			IgnoreCase:   a["ignore_case"] == true,
			MaxMatches:   smallLimit,
			Skip:         skip,
			ContextLines: int32(contextLines),
		}}
		return req, ""
	}
	for _, k := range []string{"regex", "ignore_case", "context", "skip"} {
		if _, present := a[k]; present {
			return nil, k + " needs a pattern"
		}
	}
	if asBytes {
		if hasFromEnd {
			return nil, "from_end applies to lines, not bytes"
		}
		window := &spillwayv1.BytesWindow{Offset: offset}
		if hasLimit {
			window.Limit = &limit
		}
		req.Window = &spillwayv1.ReadToolOutputRequest_Bytes{Bytes: window}
		return req, ""
	}
	if asJSON {
		req.Window = &spillwayv1.ReadToolOutputRequest_Json{Json: &spillwayv1.JsonWindow{
			Offset: offset, Limit: smallLimit, FromEnd: a["from_end"] == true,
		}}
		return req, ""
	}
	req.Window = &spillwayv1.ReadToolOutputRequest_Lines{Lines: &spillwayv1.LinesWindow{
		Offset: offset, Limit: smallLimit, FromEnd: a["from_end"] == true,
	}}
	return req, ""
}

// checkInt accepts what JavaScript's Number.isSafeInteger accepts within [lo, hi].
func checkInt(a map[string]any, name string, lo, hi int64) string {
	v, present := a[name]
	if !present {
		return ""
	}
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger || f < float64(lo) || f > float64(hi) {
		if hi == maxSafeInteger {
			return fmt.Sprintf("%s must be an integer >= %d", name, lo)
		}
		return fmt.Sprintf("%s must be an integer from %d to %d", name, lo, hi)
	}
	return ""
}

func checkBool(a map[string]any, name string) string {
	if v, present := a[name]; present {
		if _, ok := v.(bool); !ok {
			return name + " must be true or false"
		}
	}
	return ""
}

// intArg is an argument checkInt accepted, and whether it was given.
func intArg(a map[string]any, name string) (int64, bool) {
	f, ok := a[name].(float64)
	return int64(f), ok
}

// objectKeys lists a JSON object's keys in the order the text gives them, so the first unknown
// argument named is the one JavaScript's Object.keys would name (integer-like keys first).
func objectKeys(text []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys, integers []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := tok.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
		if isArrayIndex(k) {
			integers = append(integers, k)
		} else {
			keys = append(keys, k)
		}
	}
	slices.SortStableFunc(integers, func(x, y string) int {
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	})
	return append(integers, keys...)
}

// isArrayIndex reports whether JavaScript orders key as an integer index (a canonical decimal
// below 2^32 - 1).
func isArrayIndex(k string) bool {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return false
	}
	var n uint64
	for _, c := range k {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + uint64(c-'0')
	}
	return n < 1<<32-1
}

// jsonString quotes s as JSON.stringify does (no HTML escaping).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
